"""Moves on a search space: the tuning guides' probes and the steps that make them.

A step is ``["x", factor]`` (log-scaled numbers), ``["+", delta]`` (linear numbers),
``["=", value]`` or ``["!"]`` (a boolean flipped); a move is ``{flag: step}``. Pure
functions over Optuna distributions, no study.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from optuna.distributions import (BaseDistribution, CategoricalDistribution,
                                  FloatDistribution, IntDistribution)

from tuner.space.distributions import clip, movable  # noqa: F401  (proposer reads it here)

# Moves from the default, one or two flags each: {flag: step}; a step is ["x", factor]
# (log-scaled flags), ["+", delta] or ["=", value]. Numeric steps can be extended later.
PROBES: tuple[dict[str, list], ...] = (
    {"kv_cache_dtype": ["=", "fp8"]},
    {"max_num_batched_tokens": ["x", 0.5]},
    {"max_num_batched_tokens": ["x", 2.0]},
    {"enable_chunked_prefill": ["!"]},
    {"enable_prefix_caching": ["!"]},
    {"max_num_seqs": ["x", 0.25]},
    {"max_num_batched_tokens": ["x", 0.125], "max_num_seqs": ["x", 0.125]},  # low latency
    {"max_num_batched_tokens": ["x", 0.5], "max_model_len": ["x", 0.5]},  # without chunking
    {"gpu_memory_utilization": ["+", -0.2]},
    {"block_size": ["=", 32]},
)
NEAR = (0.02, 0.01)  # a factor on log-scaled numbers, a share of the range on linear ones
LOG_FACTORS = (0.5, 0.7, 1.4, 2.0)
LINEAR_STEPS = (-0.3, -0.15, -0.08, 0.08, 0.15, 0.3)  # shares of the range


def apply_step(dist: BaseDistribution, value: Any, step: list) -> Any | None:
    """One step (``["x", factor]``, ``["+", delta]``, ``["=", value]``, ``["!"]``)."""
    op, arg = step[0], step[-1]
    if op == "!":
        return clip(dist, not value)
    if op == "x":
        return clip(dist, value * arg)
    if op == "+":
        return clip(dist, value + arg)
    return clip(dist, arg)


def halved(steps: dict[str, list]) -> dict[str, list]:
    """Half of each numeric step: the square root of a factor, half a delta."""
    return {n: ["x", math.sqrt(a)] if op == "x" else ["+", a / 2] for n, (op, a) in steps.items()}


def big(steps: dict[str, list], space: dict[str, BaseDistribution]) -> bool:
    """Any step still worth trying: a factor beyond 10%, a delta beyond 2% of the range."""
    return any(abs(math.log(a)) > math.log(1.1) if op == "x"
               else abs(a) > 0.02 * (space[n].high - space[n].low)
               for n, (op, a) in steps.items() if n in space)


def random_step(dist: BaseDistribution, value: Any, rng: np.random.RandomState) -> list | None:
    """A random nearby step: a factor on a log scale, a share of the range on a linear one,
    another choice for a categorical."""
    if isinstance(dist, CategoricalDistribution):
        others = [c for c in dist.choices if c != value]
        return ["=", others[rng.randint(len(others))]] if others else None
    if isinstance(dist, (IntDistribution, FloatDistribution)) and dist.low < dist.high:
        if dist.log:
            return ["x", float(rng.choice(LOG_FACTORS))]
        return ["+", float(rng.choice(LINEAR_STEPS)) * (dist.high - dist.low)]
    return None


def probe_key(steps: dict[str, list]) -> tuple:
    return tuple(sorted((n, tuple(s)) for n, s in steps.items()))

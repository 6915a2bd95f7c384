"""The offline evaluator's requests: closed-loop load on random prompts (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tuner.loadgen.spec import Workload, build
from tuner.loadgen.trace import read_trace


# The study file's workload, read as it is (its fields are declared once, in
# tuner/loadgen/spec.py). The model runs it closed loop: ``max_concurrency`` requests in
# flight until ``num_requests`` are done; prompt and output lengths drawn uniformly from
# ``[len x (1 - range_ratio), len x (1 + range_ratio)]`` (vLLM's random dataset). With
# ``num_prefixes`` > 0 every prompt starts with one of that many shared prefixes of
# ``prefix_len`` tokens (then its own ``input_len`` tokens).
SimWorkload = Workload


def max_total_len(w: SimWorkload) -> int:
    """The longest prompt + output this workload can send."""
    r = w.range_ratio
    return (w.prefix_len if w.num_prefixes else 0) + int(w.input_len * (1 + r)) \
        + int(w.output_len * (1 + r))


def from_study(w: Workload, num_requests: int | None = None) -> SimWorkload:
    """A study file's ``[workload]``, optionally with another number of requests. A trace
    becomes random prompts of its mean input and output lengths, run closed loop as every
    workload here (``max_concurrency``, or the schema's default for an open trace): the
    model has no arrival times."""
    if w.kind == "trace":
        w = _trace_means(w)
    return w if num_requests is None else build(Workload, **{**w.model_dump(),
                                                             "num_requests": num_requests})


def _trace_means(w: Workload) -> Workload:
    records = read_trace(w.trace or "", w.trace_sha256)
    mean_in = round(sum(r.input_tokens for r in records) / len(records))
    mean_out = round(sum(r.output_tokens for r in records) / len(records))
    concurrency = w.max_concurrency or Workload.model_fields["max_concurrency"].default
    return build(Workload, **{**w.model_dump(exclude={"trace", "trace_sha256", "speedup"}), "kind": "random",
                              "input_len": mean_in, "output_len": mean_out,
                              "range_ratio": 0.0, "max_concurrency": concurrency})


@dataclass(frozen=True)
class RequestPlan:
    prompt_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    prefix_ids: tuple[int, ...]  # -1: no shared prefix


def _lengths(rng: np.random.Generator, mean: int, ratio: float, n: int) -> np.ndarray:
    lo, hi = max(1, int(mean * (1 - ratio))), max(1, int(mean * (1 + ratio)))
    return rng.integers(lo, hi + 1, size=n)


@lru_cache(maxsize=16)
def request_plan(w: SimWorkload) -> RequestPlan:
    rng = np.random.default_rng(w.seed)
    inputs = _lengths(rng, w.input_len, w.range_ratio, w.num_requests)
    outputs = _lengths(rng, w.output_len, w.range_ratio, w.num_requests)
    if w.num_prefixes > 0:
        prefixes = rng.integers(0, w.num_prefixes, size=w.num_requests)
        inputs = inputs + w.prefix_len
    else:
        prefixes = np.full(w.num_requests, -1)
    return RequestPlan(tuple(int(x) for x in inputs), tuple(int(x) for x in outputs),
                       tuple(int(x) for x in prefixes))


@lru_cache(maxsize=16)
def prompt_hashes(w: SimWorkload, block_size: int) -> tuple[tuple[int, ...], ...]:
    """Block hashes of every prompt's shared-prefix blocks (equal across the requests that
    share the prefix, as hash chains over equal tokens would be).

    A shortcut of the offline evaluator: blocks that no other request shares are left out
    (nothing can ever hit them), so they are freed as plain blocks instead of entering the
    LRU queue of cached blocks. Hits and queries are unchanged; only under memory pressure may
    shared prefixes then stay cached a little longer than in vLLM.
    """
    plan = request_plan(w)
    return tuple(tuple(hash(("p", pid, j)) for j in range(w.prefix_len // block_size))
                 if pid >= 0 else () for pid in plan.prefix_ids)

"""Random proposals from a space without a study: for `tuner space sample` and tests."""

from __future__ import annotations

import math
import random
from typing import Any

from tuner.space.params import Param
from tuner.space.space import SearchSpace


def draw_value(p: Param, rng: random.Random) -> Any:
    """One value of ``p``, as Optuna's random sampler would draw it."""
    if p.kind == "bool":
        return rng.random() < 0.5
    if p.kind == "choice":
        return rng.choice(p.choices)
    if p.kind == "int":
        lo, hi = p.low - 0.5, p.high + 0.5
        x = math.exp(rng.uniform(math.log(lo), math.log(hi))) if p.log else rng.uniform(lo, hi)
        return int(min(max(round(x), p.low), p.high))
    if p.step:
        steps = round((p.high - p.low) / p.step)
        return round(p.low + rng.randint(0, steps) * p.step, 10)
    return rng.uniform(p.low, p.high)


def draw(space: SearchSpace, rng: random.Random) -> dict[str, Any]:
    """A raw proposal: every tuned parameter drawn, the fixed ones as fixed."""
    return space.complete({p.name: draw_value(p, rng) for p in space.params})

"""A configuration on the unit cube: log-scaled numbers on a log scale, linear numbers
linearly, a categorical as its choice's index over (choices - 1); and back, snapped to the
values the space can hold (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from optuna.distributions import (BaseDistribution, CategoricalDistribution,
                                  FloatDistribution, IntDistribution)

from tuner.space.distributions import DECIMALS


@dataclass(frozen=True)
class Encoding:
    """The unit-cube coordinates of a space's parameters, in ``names`` order."""

    space: Mapping[str, BaseDistribution]

    @property
    def names(self) -> list[str]:
        return sorted(self.space)

    def categorical(self) -> np.ndarray:
        return np.array([isinstance(self.space[n], CategoricalDistribution) for n in self.names])

    def encode(self, params: Mapping[str, Any]) -> np.ndarray:
        return np.array([_to_unit(self.space[n], params[n]) for n in self.names])

    def decode(self, x: np.ndarray) -> dict[str, Any]:
        return {n: _from_unit(self.space[n], float(v)) for n, v in zip(self.names, x)}

    def snap(self, x: np.ndarray) -> np.ndarray:
        """``x`` on the values the space can hold (integers, steps, choices)."""
        return self.encode(self.decode(np.clip(x, 0.0, 1.0)))


def _to_unit(d: BaseDistribution, v: Any) -> float:
    if isinstance(d, CategoricalDistribution):
        k = len(d.choices)
        return d.choices.index(v) / (k - 1) if k > 1 else 0.0
    lo, hi = float(d.low), float(d.high)
    if hi <= lo:
        return 0.0
    if d.log:
        return (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return (float(v) - lo) / (hi - lo)


def _from_unit(d: BaseDistribution, u: float) -> Any:
    u = min(max(u, 0.0), 1.0)
    if isinstance(d, CategoricalDistribution):
        return d.choices[int(round(u * (len(d.choices) - 1)))]
    lo, hi = float(d.low), float(d.high)
    v = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if d.log else lo + u * (hi - lo)
    if isinstance(d, IntDistribution):
        step = d.step or 1
        return int(min(max(d.low + round((v - d.low) / step) * step, d.low), d.high))
    if isinstance(d, FloatDistribution) and d.step:
        v = d.low + round((v - d.low) / d.step) * d.step
    return round(min(max(v, lo), hi), DECIMALS)

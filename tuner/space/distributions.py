"""Values on an Optuna distribution: made valid, and whether it can move (pure)."""

from __future__ import annotations

from typing import Any

from optuna.distributions import (BaseDistribution, CategoricalDistribution,
                                  FloatDistribution, IntDistribution)

DECIMALS = 6  # a float rounded so that a value made valid twice is the same value


def clip(dist: BaseDistribution, value: Any) -> Any | None:
    """``value`` made valid for ``dist`` (rounded to its step, clipped), or None."""
    if isinstance(dist, CategoricalDistribution):
        return value if value in dist.choices else None
    if isinstance(dist, IntDistribution):
        return int(min(max(round(value), dist.low), dist.high))
    if isinstance(dist, FloatDistribution):
        v = min(max(float(value), dist.low), dist.high)
        if dist.step:
            v = dist.low + round((v - dist.low) / dist.step) * dist.step
        return round(v, DECIMALS)
    return None


def movable(dist: BaseDistribution) -> bool:
    """Whether ``dist`` holds more than one value."""
    if isinstance(dist, CategoricalDistribution):
        return len(dist.choices) > 1
    return isinstance(dist, (IntDistribution, FloatDistribution)) and dist.low < dist.high

"""Gain over vLLM's default configuration, in percent per objective (pure).

A gain is positive when the trial is better than the default on that objective: more
throughput, or less latency. ``+25`` on p99 ITL means a quarter less inter-token latency.
A gain inside the spread of the trial's or the default's confirmation runs (``search.confirm``,
``TrialRecord.spread``) is "within noise": the runs of one configuration differ as much.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.trials import TrialRecord
from tuner.trials.pareto import Goal


def gain_pct(value: float, reference: float, direction: str) -> float | None:
    """How much better ``value`` is than ``reference``, in percent of the reference."""
    if reference == 0:
        return None
    change = (value - reference) / abs(reference) * 100.0
    gain = change if direction == "maximize" else -change
    return gain + 0.0  # no negative zero


def gains(r: TrialRecord, default: TrialRecord | None,
          goals: Sequence[Goal]) -> dict[str, float | None]:
    """Per objective metric: the gain over ``default`` (None when either is unmeasured)."""
    out: dict[str, float | None] = {}
    for g in goals:
        v = r.metric(g.metric)
        d = default.metric(g.metric) if default is not None else None
        out[g.metric] = None if v is None or d is None else gain_pct(v, d, g.direction)
    return out


def within_noise(r: TrialRecord, default: TrialRecord | None,
                 values: dict[str, float | None]) -> dict[str, bool]:
    """Per metric: whether its gain lies inside the spread of either side's repeated runs."""
    out = {}
    for metric, gain in values.items():
        spreads = [x.spread.get(metric) for x in (r, default) if x is not None]
        out[metric] = gain is not None and any(s is not None and s.covers(gain)
                                               for s in spreads)
    return out


def format_gains(values: dict[str, float | None], noise: dict[str, bool] | None = None) -> str:
    """'+31.2% / +8.0%' (one per objective, '-' when unknown; '(within noise)' after a gain
    inside the spread)."""
    noise = noise or {}
    return " / ".join("-" if v is None else f"{round(v, 1) + 0.0:+.1f}%"
                      + (" (within noise)" if noise.get(k) else "") for k, v in values.items())

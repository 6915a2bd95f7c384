"""Gain over vLLM's default configuration, in percent per objective (pure).

A gain is positive when the trial is better than the default on that objective: more
throughput, or less latency. ``+25`` on p99 ITL means a quarter less inter-token latency.
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


def format_gains(values: dict[str, float | None]) -> str:
    """'+31.2% / +8.0%' (one per objective, '-' when unknown)."""
    return " / ".join("-" if v is None else f"{round(v, 1) + 0.0:+.1f}%" for v in values.values())

"""Hypervolume of the feasible measured trials, and how it grew trial after trial (pure).

The reference point is the default baseline's measurement when there is one (the volume
then measures how far the search got beyond vLLM's defaults), else the study's worst
acceptable values. Only points better than the reference on every objective count.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.results.pareto import Goal, candidates, minimised, vector
from tuner.results.records import TrialRecord


def hypervolume(points: Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """Volume dominated by ``points`` up to ``reference``; everything minimised.

    Exact, by slicing along the last axis (fine for the few objectives a study has)."""
    pts = [tuple(p) for p in points if all(x < r for x, r in zip(p, reference))]
    return _slice(pts, tuple(reference))


def _slice(points: list[tuple[float, ...]], ref: tuple[float, ...]) -> float:
    if not points:
        return 0.0
    if len(ref) == 1:
        return ref[0] - min(p[0] for p in points)
    pts = sorted(points, key=lambda p: p[-1])
    volume = 0.0
    for i, p in enumerate(pts):
        upper = pts[i + 1][-1] if i + 1 < len(pts) else ref[-1]
        if upper > p[-1]:
            volume += _slice([q[:-1] for q in pts[:i + 1]], ref[:-1]) * (upper - p[-1])
    return volume


def history(records: Sequence[TrialRecord], goals: Sequence[Goal],
            reference: Sequence[float]) -> list[tuple[int, float]]:
    """(trial number, hypervolume of the trials up to it) for every finished trial.

    ``reference`` is in the objectives' own units and directions."""
    ref = minimised(reference, goals)
    counted = {r.number for r in candidates(records, goals)}
    points: list[tuple[float, ...]] = []
    out = []
    for r in sorted(records, key=lambda r: r.number):
        if r.state not in ("complete", "fail"):
            continue
        if r.number in counted:
            points.append(minimised(vector(r, goals), goals))
        out.append((r.number, hypervolume(points, ref)))
    return out


def reference_point(default: TrialRecord | None, goals: Sequence[Goal],
                    worst: Sequence[float]) -> tuple[tuple[float, ...], str]:
    """(reference values, what they are): the default baseline, else the worst values."""
    values = vector(default, goals) if default is not None else None
    if values is not None:
        return values, f"the default baseline (trial {default.number})"
    return tuple(worst), "the study's worst acceptable values (no measured default baseline)"

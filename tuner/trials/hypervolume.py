"""Hypervolume of the feasible measured trials, and how it grew trial after trial (pure).

The reference point spans the trade-off the study's SLOs allow
(``tuner.trials.reference``: the SLO limit or twice the default's p99 ITL, the floor or
half the default's throughput). Only points better than the reference on every objective
count.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.trials.pareto import Goal, candidates, minimised, vector
from tuner.trials.record import TrialRecord
from tuner.trials.reference import ReferenceRule


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
                    rule: ReferenceRule) -> tuple[tuple[float, ...], str]:
    """(reference values, what they are) by the study's ``rule`` from its default
    baseline's measurement (None when it has none)."""
    values = vector(default, goals) if default is not None else None
    number = default.number if values is not None else None
    return rule.point(values), rule.label(number)

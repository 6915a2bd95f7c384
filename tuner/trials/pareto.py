"""Pareto selection over trial records, and plain non-dominance for the search (pure).

Objectives are the study's (``spec.objectives``: a metric and a direction). Only measured,
feasible trials compete: started, every SLO met. A duplicate copies another trial's
measurement and repeated configurations (``search.repeats``) are listed once, under the
first trial that measured them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from tuner.trials.record import TrialRecord, flags_key

T = TypeVar("T")


class Goal(Protocol):
    """What Pareto selection needs of an objective (``tuner.spec.study.Objective`` fits)."""

    metric: str
    direction: str


def vector(r: TrialRecord, goals: Sequence[Goal]) -> tuple[float, ...] | None:
    """The trial's objective values (from its metrics), None when one is missing."""
    out = []
    for g in goals:
        v = r.metric(g.metric)
        if v is None:
            return None
        out.append(v)
    return tuple(out)


def minimised(values: Sequence[float], goals: Sequence[Goal]) -> tuple[float, ...]:
    """Values turned so that smaller is better on every axis."""
    return tuple(-v if g.direction == "maximize" else v for v, g in zip(values, goals))


def dominates(a: Sequence[float], b: Sequence[float], goals: Sequence[Goal]) -> bool:
    """``a`` is no worse than ``b`` on every objective and better on one."""
    ma, mb = minimised(a, goals), minimised(b, goals)
    return all(x <= y for x, y in zip(ma, mb)) and any(x < y for x, y in zip(ma, mb))


def by_config(records: Sequence[TrialRecord]) -> list[list[TrialRecord]]:
    """The records grouped by effective configuration, each group and the groups in trial
    order (a group's first record is the configuration's first trial)."""
    groups: dict[str, list[TrialRecord]] = {}
    for r in sorted(records, key=lambda r: r.number):
        groups.setdefault(flags_key(r.flags), []).append(r)
    return list(groups.values())


def unique_configs(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The first record of each distinct effective configuration, in trial order."""
    return [group[0] for group in by_config(records)]


def repeats(records: Sequence[TrialRecord]) -> dict[int, tuple[TrialRecord, ...]]:
    """For the first record of each configuration (``unique_configs``), the later ones of
    the same effective flags, in trial order; configurations measured once are absent.
    Those later trials never show on the front themselves, so their figures would be
    lost without this: two starts of one configuration are its spread across starts."""
    return {group[0].number: tuple(group[1:]) for group in by_config(records)
            if len(group) > 1}


def candidates(records: Sequence[TrialRecord], goals: Sequence[Goal]) -> list[TrialRecord]:
    """Measured, feasible trials with every objective's metric, one per configuration."""
    ok = [r for r in records if r.measured and r.feasible and vector(r, goals) is not None]
    return unique_configs(ok)


def pareto_front(records: Sequence[TrialRecord], goals: Sequence[Goal]) -> list[TrialRecord]:
    """The non-dominated candidates, best first on the first objective."""
    cands = candidates(records, goals)
    vecs = {r.number: vector(r, goals) for r in cands}
    front = [r for r in cands
             if not any(dominates(vecs[o.number], vecs[r.number], goals) for o in cands)]
    return sorted(front, key=lambda r: (minimised(vecs[r.number], goals), r.number))


def nondominated(items: Sequence[T], vectors: Sequence[Sequence[float]]) -> list[T]:
    """The items whose vector (lower is better on every axis) no other vector dominates;
    equal vectors do not dominate each other."""
    return [items[i] for i, a in enumerate(vectors)
            if not any(all(x <= y for x, y in zip(b, a)) and b != a for b in vectors)]

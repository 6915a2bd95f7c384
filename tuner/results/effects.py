"""Which flags matter: the mean of each objective per value group of each flag (pure).

For every tuned flag the measured configurations are grouped by its value (booleans and
choices by value; numbers into a low and a high half around their median). A flag's
effect on an objective is the spread between its groups' means, in percent of the mean
over all configurations. A flag with a single observed value has no effect to show.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.trials import TrialRecord
from tuner.trials.pareto import Goal, unique_configs, vector


@dataclass(frozen=True)
class Group:
    label: str
    n: int
    means: tuple[float, ...]  # one per objective


@dataclass(frozen=True)
class FlagEffect:
    name: str
    groups: tuple[Group, ...]
    spread_pct: tuple[float, ...]  # one per objective


def _label(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _groups_of(name: str, rows: list[tuple[object, tuple[float, ...]]]) -> list[tuple[str, list]]:
    values = [v for v, _ in rows]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if numeric and len(set(values)) > 2:
        cut = statistics.median(values)
        low = [vec for v, vec in rows if v <= cut]
        high = [vec for v, vec in rows if v > cut]
        return [(f"<= {cut:g}", low), (f"> {cut:g}", high)] if high else []
    keys = sorted({_label(v) for v in values})
    return [(k, [vec for v, vec in rows if _label(v) == k]) for k in keys]


def flag_effects(records: Sequence[TrialRecord], names: Sequence[str],
                 goals: Sequence[Goal]) -> list[FlagEffect]:
    """Effects of the flags ``names`` over the measured configurations, largest first."""
    measured = [r for r in unique_configs([r for r in records if r.measured])
                if vector(r, goals) is not None]
    if len(measured) < 2:
        return []
    overall = [statistics.fmean(vector(r, goals)[i] for r in measured) for i in range(len(goals))]
    out = []
    for name in names:
        rows = [(r.flags[name], vector(r, goals)) for r in measured if name in r.flags]
        groups = [(label, vecs) for label, vecs in _groups_of(name, rows) if vecs]
        if len(groups) < 2:
            continue
        made = tuple(Group(label, len(vecs), tuple(statistics.fmean(v[i] for v in vecs)
                                                    for i in range(len(goals))))
                     for label, vecs in groups)
        spread = tuple(
            (max(g.means[i] for g in made) - min(g.means[i] for g in made))
            / abs(overall[i]) * 100.0 if overall[i] else 0.0 for i in range(len(goals)))
        out.append(FlagEffect(name, made, spread))
    return sorted(out, key=lambda e: (-e.spread_pct[0], e.name))

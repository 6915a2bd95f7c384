"""A full-factorial grid over a study's search space, inside its rules (pure).

Each tuned flag gets a few levels spread over its range (log-spaced where the flag is
searched on a log scale), booleans and choices all their values; the grid is every
combination, completed with the fixed flags, minus what the rule set forbids.
"""

from __future__ import annotations

import itertools
from typing import Any

from tuner.space.params import Param
from tuner.space.space import SearchSpace


def axis_levels(p: Param, n: int) -> tuple[Any, ...]:
    """``n`` values spread over ``p``'s range (fewer when they round to the same value)."""
    if p.kind == "bool":
        return (False, True)
    if p.kind == "choice":
        return tuple(p.choices)
    if n <= 1 or p.low == p.high:
        return (p.low if p.kind == "float" else int(p.low),)
    if p.log:
        raw = [p.low * (p.high / p.low) ** (i / (n - 1)) for i in range(n)]
    else:
        raw = [p.low + (p.high - p.low) * i / (n - 1) for i in range(n)]
    if p.kind == "int":
        return tuple(sorted({int(round(v)) for v in raw}))
    if p.step:
        raw = [round(round(v / p.step) * p.step, 10) for v in raw]
    return tuple(sorted(set(raw)))


def space_grid(space: SearchSpace, levels: int = 4) -> tuple[dict[str, tuple[Any, ...]],
                                                               list[dict[str, Any]]]:
    """(the axes, every grid point as complete flags that the space and its rules allow)."""
    axes = {p.name: axis_levels(p, levels) for p in space.params}
    points = []
    for combo in itertools.product(*axes.values()):
        flags = space.complete(dict(zip(axes, combo)))
        if space.contains(flags) and not space.rules.violations(flags, space.context):
            points.append(flags)
    return axes, points

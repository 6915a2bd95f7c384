"""Repair: move a proposal that breaks a rule to the nearest valid configuration.

Valid is: every rule met and every flag of vLLM's compile key on the space's grid
(``compile_grid``: a budget snapped up where a rule needs more). Repair leaves a valid
configuration unchanged and is idempotent. When the nearest
configuration would leave the space (a fixed value changed, a value outside its range),
the proposal is infeasible: it is recorded without a launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tuner.space.compile_grid import GRID_RULE, on_grid
from tuner.space.space import SearchSpace

MAX_PASSES = 12  # a rule's move, its flag onto the grid, the next rule's move, ...


@dataclass(frozen=True)
class Repaired:
    """The outcome of a repair: the flags, the rules that moved them, and, when no valid
    configuration is near, why the proposal is infeasible."""

    flags: Mapping[str, Any]
    fixed_rules: tuple[str, ...] = ()
    infeasible: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.fixed_rules)


def _in_space(space: SearchSpace, flags: Mapping[str, Any]) -> str | None:
    refused = ", ".join(f"{k}={v!r}" for k, v in space.refused(flags).items())
    if refused:
        return f"{refused}: lossy, and the study did not opt in"
    for p in space.params:
        if not p.contains(flags[p.name]):
            return f"{p.name}={flags[p.name]!r} falls outside {p.low}..{p.high}"
    for name, value in space.fixed.items():
        if flags[name] != value:
            return f"{name} is fixed at {value!r} but the rules need {flags[name]!r}"
    return None


def repair(space: SearchSpace, flags: Mapping[str, Any]) -> Repaired:
    """The nearest configuration to ``flags`` that meets every rule of the space."""
    current = dict(flags)
    applied: list[str] = []
    for _ in range(MAX_PASSES):
        broken = space.rules.violations(current, space.context)
        if broken:
            broken[0].repair(current, space.context)
            applied.append(broken[0].id)
            continue
        move = on_grid(space, current)
        if move is None:
            break
        current[move[0]] = move[1]
        applied.append(GRID_RULE)
    else:
        left = [r.id for r in space.rules.violations(current, space.context)]
        return Repaired(dict(flags), tuple(applied),
                        "no valid configuration near: " + ", ".join(left or [GRID_RULE]))
    outside = _in_space(space, current)
    if outside:
        how = f"repair by {applied[-1]} leaves the space" if applied else "outside the space"
        return Repaired(dict(flags), tuple(applied), f"{how}: {outside}")
    return Repaired(current, tuple(dict.fromkeys(applied)))

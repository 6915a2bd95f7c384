"""Repair: move a proposal that breaks a rule to the nearest valid configuration.

Repair leaves a valid configuration unchanged and is idempotent. When the nearest
configuration would leave the space (a fixed value changed, a value outside its range),
the proposal is infeasible: it is recorded without a launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tuner.space.space import SearchSpace

MAX_PASSES = 8


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
        if not broken:
            break
        rule = broken[0]
        rule.repair(current, space.context)
        applied.append(rule.id)
    else:
        broken = space.rules.violations(current, space.context)
        return Repaired(dict(flags), tuple(applied),
                        "no valid configuration near: " + ", ".join(r.id for r in broken))
    outside = _in_space(space, current)
    if outside:
        how = f"repair by {applied[-1]} leaves the space" if applied else "outside the space"
        return Repaired(dict(flags), tuple(applied), f"{how}: {outside}")
    return Repaired(current, tuple(dict.fromkeys(applied)))

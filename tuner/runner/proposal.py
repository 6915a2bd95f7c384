"""From an asked trial to the configuration to run: baseline as given, or the sampler's
proposal through the rules (repaired, or infeasible without a launch), and whether the same
effective flags were already measured."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner import record
from tuner.space import SearchSpace, repair


@dataclass(frozen=True)
class Proposal:
    flags: Mapping[str, Any]          # effective configuration
    launch: Mapping[str, Any]         # what goes on the command line
    baseline: str | None = None
    repaired: tuple[str, ...] = ()
    infeasible: str | None = None

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"flags": dict(self.flags), "launch": dict(self.launch)}
        if self.baseline:
            out["baseline"] = self.baseline
        if self.repaired:
            out["repaired"] = list(self.repaired)
        return out


def propose(space: SearchSpace, trial: optuna.Trial) -> Proposal:
    """The configuration for an asked trial (its params already sampled)."""
    attrs = trial.user_attrs
    if "baseline" in attrs:
        return Proposal(attrs["flags"], attrs["launch"], baseline=attrs["baseline"])
    raw = space.complete(trial.params)
    fixed = repair(space, raw)
    if fixed.infeasible:
        return Proposal(raw, raw, repaired=fixed.fixed_rules, infeasible=fixed.infeasible)
    return Proposal(dict(fixed.flags), dict(fixed.flags), repaired=fixed.fixed_rules)


def already_measured(study: optuna.Study, flags: Mapping[str, Any],
                     exclude: int) -> FrozenTrial | None:
    """An earlier finished trial with the same effective flags that was measured or found
    infeasible (a duplicate's source is followed to the original)."""
    key = record.flags_key(flags)
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.number == exclude or t.user_attrs.get("outcome") not in (record.MEASURED,
                                                                       record.INFEASIBLE):
            continue
        if record.flags_key(t.user_attrs.get("flags", {})) == key:
            return t
    return None

"""From an asked trial to the configuration to run: baseline as given, or the sampler's
proposal through the rules (repaired, or infeasible without a launch). Whether the same
effective flags were already measured is ``tuner.trials.queries.already_measured``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import optuna

from tuner.space import SearchSpace, repair
from tuner.trials.record import TrialRecord


@dataclass(frozen=True)
class Proposal:
    flags: Mapping[str, Any]          # effective configuration
    launch: Mapping[str, Any]         # what goes on the command line
    baseline: str | None = None
    repaired: tuple[str, ...] = ()
    infeasible: str | None = None

    def record(self) -> TrialRecord:
        """The trial's record before it runs: what was proposed."""
        return TrialRecord(flags=dict(self.flags), launch=dict(self.launch),
                           baseline=self.baseline, repaired=tuple(self.repaired))


def propose(space: SearchSpace, trial: optuna.Trial) -> Proposal:
    """The configuration for an asked trial (its params already sampled)."""
    asked = TrialRecord.from_user_attrs(trial.user_attrs)
    if asked.baseline:
        return Proposal(asked.flags, asked.launch, baseline=asked.baseline)
    raw = space.complete(trial.params)
    fixed = repair(space, raw)
    if fixed.infeasible:
        return Proposal(raw, raw, repaired=fixed.fixed_rules, infeasible=fixed.infeasible)
    return Proposal(dict(fixed.flags), dict(fixed.flags), repaired=fixed.fixed_rules)

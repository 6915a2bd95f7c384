"""From an asked trial to the configuration to run: baseline as given, or the sampler's
proposal through the rules (repaired, or infeasible without a launch). Whether the same
effective flags were already measured is ``tuner.trials.queries.already_measured``.

A baseline's launch is read from the database, where the dashboard, a user or anyone with
a login may have rewritten it: it meets the catalogue and the lossless rule again here
(``launch_problem``), and one that fails is ``refused``: the worker records the trial as
failed with that reason and starts no server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import optuna

from tuner.space import SearchSpace, repair
from tuner.space.check import launch_problem
from tuner.trials.record import TrialRecord


@dataclass(frozen=True)
class Proposal:
    flags: Mapping[str, Any]          # effective configuration
    launch: Mapping[str, Any]         # what goes on the command line
    baseline: str | None = None
    repaired: tuple[str, ...] = ()
    infeasible: str | None = None
    refused: str | None = None       # a stored launch that may not run, and why

    def record(self) -> TrialRecord:
        """The trial's record before it runs: what was proposed."""
        return TrialRecord(flags=dict(self.flags), launch=dict(self.launch),
                           baseline=self.baseline, repaired=tuple(self.repaired))


def propose(space: SearchSpace, trial: optuna.Trial) -> Proposal:
    """The configuration for an asked trial (its params already sampled)."""
    try:
        asked = TrialRecord.from_user_attrs(trial.user_attrs)
    except (TypeError, ValueError) as e:  # e.g. a launch stored as text
        return Proposal({}, {}, refused=f"its stored attributes cannot be read: {e}")
    if asked.baseline:
        bad = launch_problem(asked.launch, space.lossy)
        return Proposal(asked.flags, asked.launch, baseline=asked.baseline,
                        refused=f"stored launch refused: {bad}" if bad else None)
    raw = space.complete(trial.params)
    fixed = repair(space, raw)
    if fixed.infeasible:
        return Proposal(raw, raw, repaired=fixed.fixed_rules, infeasible=fixed.infeasible)
    return Proposal(dict(fixed.flags), dict(fixed.flags), repaired=fixed.fixed_rules)

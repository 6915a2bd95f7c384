"""Told trials for the search's unit tests: frozen trials made from plain rows, numbered as
a stored study numbers them, with what the runner writes (effective flags, baseline,
outcome, engine report, constraints) and no sampler involved."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

DIRECTIONS = ("maximize", "minimize")  # throughput, p99 ITL: the default objectives


def row(params: Mapping[str, Any], values: Sequence[float] | None = None, *,
        baseline: str | None = None, outcome: str | None = None, starts: float = 0.0,
        slo: float | None = None, server: Mapping[str, float] | None = None,
        flags: Mapping[str, Any] | None = None, move: Mapping[str, Any] | None = None,
        state: TrialState = TrialState.COMPLETE) -> dict[str, Any]:
    """One trial: complete with ``values`` (else running: no flags yet unless given), its
    ``flags`` the parameters unless given; ``slo``: an SLO constraint's value (<= 0: met)."""
    running = state == TrialState.RUNNING
    attrs: dict[str, Any] = {} if running and flags is None else {
        "flags": dict(flags if flags is not None else params)}
    for key, value in (("baseline", baseline), ("outcome", outcome), ("server", server)):
        if value is not None:
            attrs[key] = value
    constraints = {"starts": starts, **({} if slo is None else {"slo": slo})}
    return dict(params=dict(params), values=None if running else list(values or ()),
                user_attrs=attrs, state=state, constraints=None if running else constraints,
                system_attrs={} if move is None else {"front:move": dict(move)})


def stored_study(space: Mapping[str, BaseDistribution], rows: Sequence[Mapping[str, Any]],
                 directions: Sequence[str] = DIRECTIONS) -> optuna.Study:
    """An in-memory study holding the rows (numbered from 0, in order)."""
    study = optuna.create_study(directions=list(directions))
    for r in rows:
        dists = {n: space[n] for n in r["params"]}
        study.add_trial(optuna.trial.create_trial(distributions=dists, **r))
    return study


def stored(space: Mapping[str, BaseDistribution], rows: Sequence[Mapping[str, Any]],
           directions: Sequence[str] = DIRECTIONS) -> list[FrozenTrial]:
    """The rows as an in-memory study stores them (numbered from 0, in order)."""
    return stored_study(space, rows, directions).get_trials(deepcopy=False)

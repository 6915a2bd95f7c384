"""One proposal's view of the study, built once from its trials (pure).

``history(...)`` turns Optuna's trials into a frozen ``History``: what was asked (as asked,
as run and as the rules will run what is in flight), what was told and measured, what is
in flight, the proposals other workers hold, the default baseline, and the configurations
that a measured trial's engine showed would measure alike (``echoes``: a cap it never
reached, moved; ``tuner.space.unreached``). The mechanisms after it read the trials through it; a trial's record is
read from the frozen trial it holds (``record_of``, ``origin``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.space.unreached import unbound_moves
from tuner.search.front.encoding import Encoding
from tuner.search.front.settings import MOVE, STARTS, FrontSettings
from tuner.space.distributions import clip
from tuner.trials.queries import from_frozen, readable
from tuner.trials.record import Outcome, TrialRecord


def record_of(t: FrozenTrial) -> TrialRecord:
    """The trial's typed record (its user attributes read once)."""
    return from_frozen(t)


def started(t: FrozenTrial) -> bool:
    """Measured: complete with finite values, ``starts`` <= 0, not infeasible."""
    return (t.state == TrialState.COMPLETE and t.values is not None
            and all(math.isfinite(v) for v in t.values)
            and (t.constraints or {}).get(STARTS, 0.0) <= 0
            and record_of(t).outcome != Outcome.INFEASIBLE)


def feasible(t: FrozenTrial) -> bool:
    """Measured, and every constraint met."""
    return started(t) and all(v <= 0 for v in (t.constraints or {}).values())


def origin(t: FrozenTrial, space: Mapping[str, BaseDistribution]) -> dict[str, Any]:
    """What ``t`` ran with, in the space's terms: its effective flags where they are valid
    values, else its parameters."""
    flags = record_of(t).flags
    out = {}
    for name, dist in space.items():
        value = clip(dist, flags[name]) if name in flags else None
        out[name] = value if value is not None else t.params.get(name)
    return out


def placed(t: FrozenTrial, space: Mapping[str, BaseDistribution], as_run: bool
           ) -> dict[str, Any]:
    """``origin`` when ``as_run``, else the trial's parameters in the space."""
    return origin(t, space) if as_run else {n: t.params.get(n) for n in space}


def moves_of(trials: Sequence[FrozenTrial]) -> list[Mapping[str, Any]]:
    """The proposals' moves (``MOVE``) the trials hold."""
    return [t.system_attrs[MOVE] for t in trials if isinstance(t.system_attrs.get(MOVE), dict)]


def pending_of(trials: Sequence[FrozenTrial], space: Mapping[str, BaseDistribution]
               ) -> list[dict[str, Any]]:
    """What the trials still being asked (RUNNING, their parameters not yet written: Optuna
    writes them after the sampler returns) proposed, from their moves."""
    out = []
    for t in trials:
        move = t.system_attrs.get(MOVE)
        params = move.get("params") if isinstance(move, dict) else None
        if (t.state == TrialState.RUNNING and isinstance(params, dict)
                and not set(space) <= set(t.params) and set(space) <= set(params)):
            out.append({n: params[n] for n in space})
    return out


def running_of(trials: Sequence[FrozenTrial], space: Mapping[str, BaseDistribution]
               ) -> list[dict[str, Any]]:
    """The configurations of the trials running with their parameters written."""
    return [{n: t.params[n] for n in space} for t in trials
            if t.state == TrialState.RUNNING and set(space) <= set(t.params)]


def probes_held(moves: Sequence[Mapping[str, Any]]) -> set[tuple[Any, Any]]:
    """The probes these moves hold, as (parent trial, probe index)."""
    return {(m.get("parent"), m.get("probe")) for m in moves if m.get("kind") == "probe"}


@dataclass(frozen=True, eq=False)
class History:
    """The trials as one proposal sees them (built by ``history``); rows are encoded
    configurations (``enc``), one per trial or configuration."""

    space: Mapping[str, BaseDistribution]
    enc: Encoding
    maximise: np.ndarray  # bool per objective
    cells: np.ndarray  # bool per dimension: a mode switch (``FrontSettings.cells``)
    trials: tuple[FrozenTrial, ...]  # every other trial with the space's parameters
    told: tuple[FrozenTrial, ...]  # complete, not a duplicate
    measured: tuple[FrozenTrial, ...]  # told and started
    running: tuple[FrozenTrial, ...]
    pending: tuple[dict[str, Any], ...]  # what trials still being asked proposed
    moves: tuple[Mapping[str, Any], ...]  # every other trial's move
    default: FrozenTrial | None  # the default baseline
    asked: np.ndarray  # every configuration asked, run, or in flight as it will run
    measured_x: np.ndarray  # where each measured trial ran (``origin``)
    echoes: tuple[tuple[int, np.ndarray], ...]  # (measured index, row) measuring alike
    as_run: bool = True  # a trial is where it ran (``origin``), else as asked

    def at(self, t: FrozenTrial) -> dict[str, Any]:
        """Where ``t`` is in the space: where it ran (``origin``), or, without the rule
        ``FrontSettings.as_run``, its parameters as asked."""
        return placed(t, self.space, self.as_run)

    @property
    def count(self) -> int:
        """The study's number of objectives."""
        return len(self.maximise)

    def minimised(self, values: np.ndarray) -> np.ndarray:
        """Objective values (... x d) with each maximised one negated."""
        return np.where(self.maximise, -values, values)


def history(settings: FrontSettings, trials: Sequence[FrozenTrial], directions,
            space: Mapping[str, BaseDistribution],
            moves: Sequence[Mapping[str, Any]] | None = None,
            pending: Sequence[Mapping[str, Any]] = ()) -> History:
    """``trials``: the other trials that have the space's parameters; ``moves``: every
    other trial's move, those still being asked included (default: the moves of
    ``trials``); ``pending``: the parameters those still being asked proposed
    (``pending_of``), counted as asked and in flight. A trial whose stored record does not
    read back is left out, as every reader leaves it (``tuner.trials.queries.readable``)."""
    trials = [t for t in trials if readable(t) is not None]
    enc = Encoding(dict(space))
    fix = settings.repair
    pending = tuple(dict(p) for p in pending)
    asked = [enc.encode(t.params) for t in trials]
    if settings.as_run:
        asked += [enc.encode(origin(t, space)) for t in trials]
    if fix is not None:  # a trial in flight has no flags yet: as it will run
        fixed = [fix(dict(t.params)) for t in trials if t.state == TrialState.RUNNING]
        asked += [enc.encode(f) for f in fixed if f is not None]
    asked += [enc.encode(p) for p in pending]
    if fix is not None:
        asked += [enc.encode(f) for f in (fix(dict(p)) for p in pending) if f is not None]
    told = tuple(t for t in trials if t.state == TrialState.COMPLETE
                 and record_of(t).outcome != Outcome.DUPLICATE)
    measured = tuple(t for t in told if started(t))
    measured_x = np.array([enc.encode(placed(t, space, settings.as_run))
                           for t in measured]).reshape(-1, len(enc.names))
    echoes = tuple(_echoes(settings, enc, space, measured)) if settings.echoes else ()
    return History(
        space=space, enc=enc,
        maximise=np.array([d == optuna.study.StudyDirection.MAXIMIZE for d in directions]),
        cells=np.array([settings.cell_kernel and n in settings.cells for n in enc.names]),
        trials=tuple(trials), told=told, measured=measured,
        running=tuple(t for t in trials if t.state == TrialState.RUNNING),
        pending=pending,
        moves=tuple(moves) if moves is not None else tuple(moves_of(trials)),
        default=next((t for t in trials if record_of(t).baseline == "default"), None),
        asked=np.array(asked).reshape(-1, len(enc.names)), measured_x=measured_x,
        echoes=echoes, as_run=settings.as_run)


def _echoes(settings: FrontSettings, enc: Encoding, space, measured
            ) -> list[tuple[int, np.ndarray]]:
    """(index in ``measured``, encoded configuration) for each configuration that a
    measured trial's engine showed would measure the same (``tuner.space.unreached``: a cap
    it never reached, moved), where the space's rules leave it as it is."""
    out = []
    for i, t in enumerate(measured):
        here = placed(t, space, settings.as_run)
        told = record_of(t)
        for params in unbound_moves(here, told.server, space, told.flags):
            fixed = settings.repair(dict(params)) if settings.repair is not None else params
            x = enc.encode(params)
            if fixed is not None and np.allclose(enc.encode(fixed), x):
                out.append((i, x))
    return out

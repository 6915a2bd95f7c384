"""The front sampler's Optuna protocol and its worker-claim protocol.

``sample_relative`` builds one ``History`` of the other trials and asks ``propose`` for the
next configuration; it writes the proposal's move (``MOVE``: its kind and the parameters
proposed) to the trial's system attributes, then checks that no other worker holds the
same proposal (``claimed``) and proposes again if one does. A trial another worker is
still asking (Optuna writes its parameters after the sampler returns) counts by the
parameters its move holds. Workers that ask at the same moment each write their move,
then read the others', so at least one of two sees the other's.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import TrialState

from tuner import optuna_adapter
from tuner.search.front.candidates import unasked
from tuner.search.front.history import (History, history, moves_of, pending_of, probes_held,
                                        running_of)
from tuner.search.front.proposal import propose
from tuner.search.front.settings import MOVE, OBJECTIVES, FrontSettings


class FrontSampler(optuna.samplers.BaseSampler):
    """Probes, then expected hypervolume improvement under Gaussian processes
    (``tuner.search.front``)."""

    def __init__(self, settings: FrontSettings, seed: int | None = None) -> None:
        self.settings = settings
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._random = optuna.samplers.RandomSampler(seed=seed)

    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return optuna.search_space.intersection_search_space(
            study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        serves(self.settings, len(study.directions))
        if not search_space:
            return {}
        for _ in range(len(self.settings.probes) * self.settings.claims + 1):
            others = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
            trials = [t for t in others if set(search_space) <= set(t.params)]
            # a trial another worker is asking has its move before its parameters
            h = history(self.settings, trials, study.directions, search_space,
                        moves_of(others), pending=pending_of(others, search_space))
            out = propose(h, self.settings, self._rng, self._seed)
            if out is None:
                return {}
            params, move = out
            move = {**move, "params": {k: _plain(v) for k, v in params.items()}}
            optuna_adapter.set_trial_system_attr(study, trial, MOVE, move)
            if not claimed(self.settings, study, trial, move, h):
                return params
        return {}

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        value = self._random.sample_independent(study, trial, param_name, param_distribution)
        if self.settings.grid is None:
            return value
        return self.settings.grid({param_name: value})[param_name]  # on the compile grid

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._random.reseed_rng()


def serves(settings: FrontSettings, count: int) -> None:
    """Refuse a study of a number of objectives the sampler cannot serve, or one its
    reference point was not made for (``tuner study create`` refuses the first)."""
    if count not in OBJECTIVES:
        raise ValueError(f"the front sampler serves {', '.join(map(str, OBJECTIVES))} "
                         f"objectives, not {count}")
    if len(settings.reference.bounds) != count:
        raise ValueError(f"the front sampler's reference has "
                         f"{len(settings.reference.bounds)} objectives, the study "
                         f"{count}: give FrontSettings.for_study(spec)")


def claimed(settings: FrontSettings, study, trial, move: Mapping[str, Any],
            h: History) -> bool:
    """Whether another trial holds this proposal: the same probe, or (any move) the same
    configuration that a trial still being asked proposed or a running trial runs (a probe
    clipped to the space's edge is the same configuration whatever its jitter); never
    without the rule ``FrontSettings.claim_check``. The running trials count because
    another worker's trial may have been asked, and its parameters written, between this
    proposal's history and this check."""
    if not settings.claim_check:
        return False
    others = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
    if move["kind"] == "probe" and (move.get("parent"), move.get("probe")) in \
            probes_held(moves_of(others)):
        return True
    pending = pending_of(others, h.space) + running_of(others, h.space)
    return bool(pending) and not unasked(history(settings, [], (), h.space, pending=pending),
                                         settings, move["params"])


def _plain(value: Any) -> Any:
    """A proposed value as JSON stores it (numpy scalars as Python's)."""
    return value.item() if isinstance(value, np.generic) else value

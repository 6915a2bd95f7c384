"""Asking the sampler for a trial so that no trial is left RUNNING without a heartbeat.

``study.ask`` marks a trial RUNNING before the sampler runs (``before_trial``, then one
suggestion per parameter). A sampler that raised there left the trial running with no
heartbeat, so nothing ever closed it and it spent a budget slot for ever (issue 20).
``Watched`` wraps the worker's sampler: as soon as Optuna hands it the new trial it tells
the worker (``claim``: the worker's name on the trial and a first heartbeat, so a worker
killed while the sampler runs has its trial failed as stale); ``ask`` closes a trial whose
proposal raised as failed, and raises ``ProposalError``.
"""

from __future__ import annotations

from typing import Any, Callable

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from tuner import optuna_adapter
from tuner.errors import TunerError
from tuner.storage.outage import is_storage_error
from tuner.trials import record
from tuner.trials.record import TrialRecord


class ProposalError(TunerError):
    """The sampler failed while proposing a trial (the trial is recorded as failed)."""


class Watched(BaseSampler):
    """``inner``, which also calls ``claim(trial)`` when Optuna starts a trial."""

    def __init__(self, inner: BaseSampler, claim: Callable[[FrozenTrial], None]) -> None:
        self.inner, self.claim = inner, claim
        self.proposing: FrozenTrial | None = None

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.proposing = trial
        self.claim(trial)
        self.inner.before_trial(study, trial)

    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return self.inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, name, distribution) -> Any:
        return self.inner.sample_independent(study, trial, name, distribution)

    def after_trial(self, study, trial, state: TrialState, values) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()

    def __getattr__(self, name: str) -> Any:  # anything else the inner sampler offers
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def ask(study: optuna.Study, distributions: dict[str, BaseDistribution], base: TrialRecord
        ) -> optuna.Trial:
    """``study.ask(distributions)``; a trial whose proposal raised is told as failed
    (``base`` plus the reason) and ``ProposalError`` raised. Storage errors pass through
    (the worker waits an outage out; the trial has its heartbeat by then)."""
    watched = study.sampler
    if isinstance(watched, Watched):
        watched.proposing = None
    try:
        return study.ask(distributions)
    except Exception as e:
        frozen = watched.proposing if isinstance(watched, Watched) else None
        if is_storage_error(e) or frozen is None:
            raise
        why = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        _close(study, frozen, why, base)
        raise ProposalError(f"the sampler failed while proposing trial {frozen.number}: "
                            f"{why}") from e


def _close(study: optuna.Study, frozen: FrozenTrial, why: str, base: TrialRecord) -> None:
    """Tell by number: building an ``optuna.Trial`` would call the sampler again."""
    failed = record.failed({"class": "propose", "message": why, "log_tail": ""}, base)
    try:
        for key, value in failed.to_user_attrs().items():
            optuna_adapter.set_trial_user_attr(study, frozen, key, value)
        study.tell(frozen.number, state=TrialState.FAIL)
    except Exception:  # the storage is gone: the trial's heartbeat goes stale instead
        pass

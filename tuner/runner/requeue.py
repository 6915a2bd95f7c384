"""Configurations the worker queues again: the default for a reference run on this host,
the baselines that failed by no fault of their flags, and a trial that was stopped or
whose measurement raised (recorded first, so that no trial is left running)."""

from __future__ import annotations

import logging
from typing import Callable

import optuna

from tuner.runner.proposal import Proposal
from tuner.runner.tell import tell
from tuner.space.space import SearchSpace
from tuner.trials import drift, queries, record
from tuner.trials.parts import Failure, FailureKind
from tuner.trials.queued import enqueue_as_given, to_queue_again
from tuner.trials.record import TrialRecord

log = logging.getLogger(__name__)
Say = Callable[[str], None]


def queue_reference(study: optuna.Study, space: SearchSpace, say: Say) -> None:
    """Queue the default again for this host (``search.reference_runs``, drift.py)."""
    default = drift.to_repeat(queries.load_records(study))
    if default is None:
        return
    enqueue_as_given(study, (p.name for p in space.params), record.REFERENCE_BASELINE,
                     default.launch, default.flags)
    say(f"tuner: queued a reference run of the default (trial {default.number}) on this "
        "host")


def queue_baselines_again(study: optuna.Study, space: SearchSpace, say: Say) -> None:
    """Queue again, as launched, each baseline whose last run failed by no fault of its
    flags (``to_queue_again``: at most twice). The caller holds the study's claim lock,
    so that two workers never both queue it."""
    for last in to_queue_again(queries.load_records(study)):
        enqueue_as_given(study, (p.name for p in space.params), last.baseline, last.launch,
                         last.flags)
        why = last.failure.kind if last.failure else ("stopped" if last.stopped else
                                                      "its worker was lost")
        say(f"tuner: queued the {last.baseline} baseline again (trial {last.number}: {why}, "
            "not its flags' doing)")


def tell_stopped(study: optuna.Study, trial, prop: Proposal, base: TrialRecord,
                 say: Say) -> None:
    """Record the interrupted ``trial`` as stopped and queue its configuration again."""
    try:
        tell(study, trial, record.stopped(base))
        keep = TrialRecord(baseline=base.baseline, launch=base.launch, flags=base.flags)
        study.enqueue_trial(dict(trial.params), user_attrs=keep.to_user_attrs()
                            if prop.baseline else None)
    except Exception as e:  # the storage may be gone; the heartbeat closes the trial
        log.warning("tuner: could not record the stopped trial: %s", e)
    say(f"trial {trial.number} stopped; its configuration is queued again")


def tell_failed(study: optuna.Study, trial, base: TrialRecord, error: Exception,
                say: Say) -> None:
    """Record the trial whose measurement raised ``error`` as failed, with the error's
    text, so that it is not left running with no worker."""
    try:
        tell(study, trial, record.failed(
            Failure(kind=FailureKind.ERROR, message=f"{type(error).__name__}: {error}"),
            base))
    except Exception as e:  # the storage may be gone; the heartbeat closes the trial
        log.warning("tuner: could not record the failed trial: %s", e)
    say(f"trial {trial.number} recorded as failed")

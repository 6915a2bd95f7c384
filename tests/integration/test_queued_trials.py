"""Queued trials (reference runs, the warm start, retries of stale trials) are handed out
once each, however many workers ask at the same moment. On SQLite, Optuna's pop of a
WAITING trial was a read then a write in no transaction: four processes ran 10 to 16 of 60
queued trials twice (optuna issue 4002), and a killed worker's trial looked closed by
another (CI, test_launch_status_kill_stop_and_resume). Real processes, real storage."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import optuna
from optuna.trial import TrialState

from tuner import optuna_adapter
from tuner.study.storage import open_storage

QUEUED, WORKERS = 60, 4


def _take_queued(url: str) -> list[int]:
    """A worker's loop: ask until Optuna makes a new trial (nothing queued is left)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="queue", storage=open_storage(url))
    taken = []
    while True:
        trial = study.ask()
        if "fixed_params" not in optuna_adapter.stored_trial(study, trial).system_attrs:  # a new trial: the queue is empty
            study.tell(trial, state=TrialState.FAIL)
            break
        taken.append(trial.number)
        study.tell(trial, [float(trial.suggest_int("x", 0, QUEUED))])
    return taken


def test_each_queued_trial_is_handed_to_one_worker(storage_url):
    study = optuna.create_study(study_name="queue", storage=open_storage(storage_url))
    for x in range(QUEUED):
        study.enqueue_trial({"x": x}, skip_if_exists=False)
    with ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        taken = [f.result() for f in [pool.submit(_take_queued, storage_url)
                                      for _ in range(WORKERS)]]
    every = sorted(sum(taken, []))
    twice = sorted(n for n in set(every) if every.count(n) > 1)
    assert every == list(range(QUEUED)), f"handed out twice: {twice}"
    done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    assert sorted(t.number for t in done) == list(range(QUEUED))

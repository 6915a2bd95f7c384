"""A worker's registration on real storage (SQLite and PostgreSQL): a trial is named after
its worker and has a heartbeat from the moment the worker takes it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import optuna
import pytest
from optuna.trial import TrialState

from tuner import optuna_adapter
from tuner.storage.database import open_storage
from tuner.storage.registry import PREFIX, Registration


def _study(url: str) -> optuna.Study:
    storage = optuna.storages.RDBStorage(url, heartbeat_interval=1, grace_period=1)
    return optuna.create_study(storage=storage, study_name="reg")


def test_a_trial_taken_by_a_worker_that_dies_at_once_is_still_closed_as_stale(storage_url):
    study = _study(storage_url)
    reg = Registration(study, (0,), interval_s=3600)  # its periodic beat never comes
    reg.beat()
    taken, untouched = study.ask(), study.ask()
    reg.running(taken)  # ... and the worker dies here
    stored = study.user_attrs[PREFIX + reg.id]
    assert stored["trial"] == taken.number and stored["phase"] == "propose"
    time.sleep(2.5)
    optuna.storages.fail_stale_trials(study)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states[taken.number] == TrialState.FAIL
    # Optuna leaves a trial without any heartbeat running: what `running` guards against
    assert states[untouched.number] == TrialState.RUNNING
    assert study.trials[taken.number].user_attrs["worker"] == reg.id


class Killed(BaseException):
    """The worker dies here (SIGKILL between two writes: nothing after it runs)."""


@pytest.mark.parametrize("dies_writing", ["its name on the trial", "its own record"])
def test_a_worker_killed_while_it_claims_a_trial_still_has_it_closed(storage_url, monkeypatch,
                                                                     dies_writing):
    """Claiming writes three things: the worker's name on the trial, the worker's record
    and the trial's heartbeat. Killed after either of the first two, the trial had no
    heartbeat and stayed RUNNING for ever (a CI run of test_service_sim): now the
    heartbeat is written first."""
    from tuner.storage import registry

    study = _study(storage_url)
    reg = Registration(study, (0,), interval_s=3600)

    def killed(*args, **kwargs):
        raise Killed
    if dies_writing == "its name on the trial":
        monkeypatch.setattr(registry.optuna_adapter, "set_trial_user_attr", killed)
    else:
        monkeypatch.setattr(study, "set_user_attr", killed)
    taken = study.ask()
    with pytest.raises(Killed):
        reg.claim(study.trials[taken.number])
    monkeypatch.undo()
    time.sleep(2.5)
    optuna.storages.fail_stale_trials(study)
    assert study.trials[taken.number].state == TrialState.FAIL


def test_a_beat_lost_to_an_outage_never_closes_the_workers_own_trial(storage_url, monkeypatch):
    """After an outage longer than the grace period the worker's own trial looks stale
    until its beat lands: the heartbeat thread closes stale trials only after a written
    beat, so it fails another worker's dead trial but never the one it is measuring."""
    from tuner import optuna_adapter
    from tuner.storage import registry

    study = _study(storage_url)
    reg = Registration(study, (0,), interval_s=3600)
    mine, dead = study.ask(), study.ask()
    reg.running(mine)
    other = Registration(study, (1,), interval_s=3600)
    other.id = "other-worker"
    other.running(dead)  # ... and that worker dies
    time.sleep(2.5)  # both heartbeats are past the grace period now
    real = optuna_adapter.record_heartbeat

    def unreachable(*args, **kwargs):
        raise OSError("connection refused")  # the storage is not back for this beat yet
    monkeypatch.setattr(registry.optuna_adapter, "record_heartbeat", unreachable)
    reg.tick()
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {mine.number: TrialState.RUNNING, dead.number: TrialState.RUNNING}
    monkeypatch.setattr(registry.optuna_adapter, "record_heartbeat", real)
    reg.tick()  # the beat lands, then the stale trials are closed: only the dead one
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states[mine.number] == TrialState.RUNNING
    assert states[dead.number] == TrialState.FAIL


def test_a_closed_trial_with_a_queued_retry_spends_no_budget_until_the_retry_runs(
        storage_url):
    """A trial closed by a heartbeat is retried once (as tuner opens its storage); the
    retry stands for it in the budget, so a study whose last trial's worker died still
    runs that trial again instead of ending with the retry queued."""
    from tuner.trials import load_records, queries

    storage = optuna.storages.RDBStorage(
        storage_url, heartbeat_interval=1, grace_period=1,
        heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
            max_retry=1))
    study = optuna.create_study(storage=storage, study_name="retry")
    study.tell(study.ask(), 1.0)
    reg = Registration(study, (0,), interval_s=3600)
    reg.beat()
    taken = study.ask()
    reg.running(taken)  # ... and the worker dies here
    time.sleep(2.5)
    optuna.storages.fail_stale_trials(study)
    records = load_records(study)
    (retry,) = [r for r in records if r.retry_of == taken.number]
    assert records[taken.number].state == "fail" and retry.state == "waiting"
    assert queries.counted(records) == 1  # the measured one; the closed one waits its retry
    assert study.ask().number == retry.number  # queued: asked first
    assert queries.counted(load_records(study)) == 2


SWEEPER = textwrap.dedent('''
    import sys, time
    import optuna
    from tuner.storage.database import open_storage
    url, name = sys.argv[1:]
    study = optuna.load_study(study_name=name, storage=open_storage(url, heartbeat=True))
    print("ready", flush=True)
    beat, *ages = map(float, sys.stdin.readline().split())
    for age in ages:
        time.sleep(max(0.0, beat + age - time.time()))
        swept = time.time() - beat
        optuna.storages.fail_stale_trials(study)
        print(study.get_trials(deepcopy=False)[0].state.name, round(swept, 1), flush=True)
''')


def test_a_beat_one_interval_late_keeps_its_trial_and_two_intervals_close_it(storage_url):
    """A worker's grace is two heartbeat intervals (Optuna's default, and when `tuner
    status` calls a worker dead): a trial whose last beat is 1.75 intervals old stays
    running (a slow database delays a live worker's beat), one 2.25 intervals old is
    failed. Swept by a worker process's own storage (heartbeat 10 s), opened before the
    beat, so that its imports on a loaded host do not age the beat."""
    study = optuna.create_study(study_name="late", storage=open_storage(storage_url))
    trial = study.ask()
    sweeper = subprocess.Popen([sys.executable, "-c", SWEEPER, storage_url, "late"],
                               env={**os.environ, "TUNER_HEARTBEAT_S": "10"},
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert sweeper.stdout.readline() == "ready\n", sweeper.communicate(timeout=60)
        optuna_adapter.record_heartbeat(study, optuna_adapter.trial_id(trial))
        out, err = sweeper.communicate(f"{time.time()} 17.5 22.5\n", timeout=120)
    finally:
        sweeper.kill()
    assert sweeper.returncode == 0, err[-2000:]
    (first, age1), (second, _) = [line.split() for line in out.splitlines()]
    assert float(age1) < 20, f"the first sweep came {age1} s after the beat: host too slow"
    assert [first, second] == ["RUNNING", "FAIL"], out

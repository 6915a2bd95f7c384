"""Database outages: a private PostgreSQL server is stopped and started under a running
worker (real processes, real HTTP on the simulator); the retry helper against a real server
that is down; telling a trial again after a broken attempt; passwords never shown."""

import time

import optuna
import pytest
import sqlalchemy
from optuna.trial import TrialState

from tuner import optuna_adapter
from tuner.errors import StorageError
from tuner.runner.tell import tell
from tuner.storage import open_storage
from tuner.storage.outage import StorageUnreachable, reason, retrying, scrub, transient, waits
from tuner.testing.private_pg import PrivatePostgres, unavailable
from tuner.testing.sim_studies import running_phase, sim_study, trials_of
from tuner.testing.worker_procs import ServerWatcher, start_worker, wait_for
from tuner.trials import record
from tuner.trials.record import TrialRecord


@pytest.fixture(scope="module")
def _server():
    why = unavailable()
    if why:
        pytest.skip(why)
    with PrivatePostgres() as pg:
        yield pg


@pytest.fixture
def private_pg(_server):
    """One server for the module (initdb takes seconds), running when each test starts."""
    if not _server.running():
        _server.start()
    yield _server


def test_backoff_doubles_from_1_s_to_a_30_s_cap():
    w = waits()
    assert [next(w) for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]


def test_scrub_masks_passwords_in_urls_and_key_values():
    text = "postgresql+psycopg://tuner:s3cr3t@db:5432/t failed; password=s3cr3t host=db"
    assert "s3cr3t" not in scrub(text)
    assert "tuner:***@db" in scrub(text)
    assert scrub("error near hunter2", ("hunter2",)) == "error near ***"


def test_unreachable_database_is_retried_then_reported_without_the_password(private_pg):
    storage = open_storage(private_pg.url)
    study = optuna.create_study(storage=storage, study_name="o")
    private_pg.stop()
    said, slept = [], []
    with pytest.raises(StorageUnreachable) as caught:
        retrying(lambda: study.get_trials(), url=private_pg.url, budget=12, say=said.append,
                 sleep=slept.append, clock=lambda: sum(slept))  # a scripted clock
    assert slept == [1, 2, 4, 5]  # 1, 2, 4, then what is left of the 12 s budget
    assert said[0].startswith("storage unreachable, retrying in 1 s: ")
    assert "127.0.0.1" in said[0]
    assert all(private_pg.password not in line for line in said)
    assert private_pg.password not in str(caught.value)
    assert transient(caught.value.__cause__)


def test_other_database_errors_are_not_retried_and_other_errors_pass_through():
    def broken():
        raise sqlalchemy.exc.ProgrammingError("select nothing", {}, Exception("syntax error"))

    slept = []
    with pytest.raises(StorageError, match="syntax error"):
        retrying(broken, sleep=slept.append)
    with pytest.raises(KeyError):
        retrying(lambda: {}["x"], sleep=slept.append)
    assert slept == []


def test_wrong_password_is_not_retried_and_not_shown(private_pg):
    bad = private_pg.url.replace(private_pg.password, "wrong-Pa55word")
    engine = sqlalchemy.create_engine(bad)
    with pytest.raises(sqlalchemy.exc.OperationalError) as caught:
        engine.connect()
    assert "wrong-Pa55word" not in reason(caught.value, ("wrong-Pa55word",))
    assert not transient(caught.value)  # a refused login is no outage: no waiting
    slept = []
    with pytest.raises(StorageError) as retried:
        retrying(engine.connect, url=bad, sleep=slept.append)
    assert slept == [] and "password authentication failed" in str(retried.value)
    assert "wrong-Pa55word" not in str(retried.value)
    with pytest.raises(StorageError) as opened:
        open_storage(bad)
    assert "wrong-Pa55word" not in str(opened.value)
    assert "***" in str(opened.value)


def test_retry_resumes_when_the_database_returns(private_pg):
    storage = open_storage(private_pg.url)
    study = optuna.create_study(storage=storage, study_name="r")
    private_pg.stop()
    said = []

    def sleep(s):
        if len(said) == 2:
            private_pg.start()

    assert retrying(lambda: len(study.get_trials()), say=said.append, sleep=sleep) == 0
    assert len(said) == 2


def _told(worker="w-1"):
    return TrialRecord(state="complete", values=(100.0, 5.0),
                       constraints={"starts": 0.0, "slo:p99_itl_ms": -1.0},
                       outcome=record.MEASURED, worker=worker, flags={"a": 1})


def test_tell_twice_records_the_trial_once(storage_url):
    study = optuna.create_study(storage=storage_url, study_name="t",
                                directions=["maximize", "minimize"])
    trial = study.ask({"x": optuna.distributions.IntDistribution(0, 9)})
    tell(study, trial, _told())
    tell(study, trial, _told())  # a retry after the answer to the first was lost
    (t,) = study.get_trials()
    assert t.state == TrialState.COMPLETE and t.values == [100.0, 5.0]
    assert t.constraints == {"starts": 0.0, "slo:p99_itl_ms": -1.0}


def test_half_told_trial_is_finished_by_the_retry(storage_url):
    study = optuna.create_study(storage=storage_url, study_name="h",
                                directions=["maximize", "minimize"])
    trial = study.ask({"x": optuna.distributions.IntDistribution(0, 9)})
    trial.set_user_attr("outcome", record.MEASURED)
    trial.set_constraint("starts", 0.0)  # the connection broke after this
    tell(study, trial, _told())
    (t,) = study.get_trials()
    assert t.state == TrialState.COMPLETE and t.constraints["slo:p99_itl_ms"] == -1.0


def test_trial_closed_by_another_worker_keeps_its_measurement(storage_url):
    study = optuna.create_study(storage=storage_url, study_name="s",
                                directions=["maximize", "minimize"])
    trial = study.ask({"x": optuna.distributions.IntDistribution(0, 9)})
    # while this worker could not reach the database, another failed its trial as stale
    optuna_adapter.storage_of(study).set_trial_state_values(
        optuna_adapter.trial_id(trial), TrialState.FAIL)
    tell(study, trial, _told())
    tell(study, trial, _told())
    closed, copy = sorted(study.get_trials(), key=lambda t: t.number)
    assert closed.state == TrialState.FAIL
    assert copy.state == TrialState.COMPLETE and copy.values == [100.0, 5.0]
    assert copy.params == closed.params and copy.user_attrs["recorded_for"] == closed.number
    assert copy.constraints == {"starts": 0.0, "slo:p99_itl_ms": -1.0}


@pytest.mark.slow
def test_worker_survives_a_database_restart_and_loses_no_trial(private_pg, study_file,
                                                                tmp_path):
    url = private_pg.url
    sim_study(study_file, url, name="out", n=80, trials=4, scale=1)
    log = tmp_path / "worker.log"
    proc = start_worker("out", url, "0", env={"TUNER_HOME": str(tmp_path),
                                              "TUNER_HEARTBEAT_S": "2"}, log=log)
    with ServerWatcher([proc.pid]) as watcher:
        # a trial after the first is benchmarking: stop the database under it for 8 s (any
        # such trial: on a loaded host a poll can miss the whole benchmark of one)
        info = wait_for(lambda: _past_the_first(running_phase(url, "out")), 120)
        assert info, log.read_text()[-3000:]
        private_pg.stop()
        down_since = len(watcher.seen)
        wait_for(lambda: False, 8)
        during = len(watcher.seen)
        private_pg.start()
        back_at = time.time()
        assert proc.wait(timeout=240) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "storage unreachable, retrying in " in text
    assert private_pg.password not in text
    assert during >= down_since  # the trial measured during the outage
    trials = trials_of("out", url)
    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL) for t in trials), (
        [(t.number, t.state.name, t.user_attrs.get("outcome")) for t in trials],
        text[-3000:])
    launched = [t for t in trials if t.state == TrialState.COMPLETE
                and t.user_attrs["outcome"] != record.DUPLICATE]
    servers = watcher.servers()
    # every server the worker started is one recorded trial, and no trial is there twice
    assert sorted(map(tuple, servers)) == sorted(tuple(t.user_attrs["command"])
                                                 for t in launched)
    assert len({record.flags_key(t.user_attrs["flags"]) for t in launched}) == len(launched)
    assert len(launched) >= 3
    # the trial that was benchmarking when the database stopped: recorded once it returned
    (cut,) = [t for t in trials if t.number == info["trial"]]
    assert cut.user_attrs["outcome"] == record.MEASURED
    assert cut.datetime_complete.timestamp() >= back_at - 1


def _past_the_first(info: dict | None) -> dict | None:
    """A worker's published state when it benchmarks a trial after the first, else None."""
    return info if info and (info.get("trial") or 0) >= 1 else None

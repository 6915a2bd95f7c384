"""`tuner status` says when vLLM's defaults are missing (issue 63, point 4), with what became
of each run and the command that queues them again; `tuner enqueue STUDY --baseline
default` queues them, once, and refuses a name that is no baseline; real `tuner`
processes on SQLite and PostgreSQL."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from tuner import optuna_adapter
from tuner.runner.tell import tell
from tuner.space import baselines
from tuner.storage import open_study
from tuner.testing.cli_fork import run_tuner
from tuner.testing.studies import make_study
from tuner.trials import load_records, record
from tuner.trials.parts import Failure, FailureKind
from tuner.trials.record import TrialRecord


def _fail_the_baselines(storage_url: str) -> str:
    """The `empty` fixture study with its three baselines told as starved-client runs."""
    opened = make_study(storage_url, "empty", name="nodefault")
    study = optuna.load_study(study_name="nodefault",
                              storage=optuna_adapter.storage_of(opened.study))
    for _ in range(3):
        trial = study.ask(opened.space.distributions())
        asked = TrialRecord.from_user_attrs(trial.user_attrs)
        tell(study, trial, record.failed(Failure(kind=FailureKind.INVALID_MEASUREMENT,
                                                 message="the client was starved"), asked))
    return "nodefault"


def test_status_names_the_missing_default_and_enqueue_queues_it(storage_url):
    name = _fail_the_baselines(storage_url)
    status = run_tuner(["status", name, "--storage", storage_url, "--once"])
    assert status.returncode == 0, status.stderr
    line = next((x for x in status.stdout.splitlines() if x.startswith("default baseline")),
                status.stdout)
    assert line.startswith("default baseline (vLLM's defaults): missing, trial 0 failed: "
                           "invalid-measurement; gains need it: `tuner enqueue "
                           f"{name} --baseline default"), line
    assert line.endswith(" queues it again"), line

    done = run_tuner(["enqueue", name, "--baseline", "default", "--storage", storage_url])
    assert done.returncode == 0, done.stderr
    assert "queued the default baseline" in done.stdout
    opened = open_study(name, storage_url)
    waiting = [r for r in load_records(opened.study) if r.state == record.WAITING]
    assert [(r.baseline, dict(r.flags)) for r in waiting] == [
        ("default", dict(baselines(opened.space)[0].flags))]
    status = run_tuner(["status", name, "--storage", storage_url, "--once"])
    assert "default baseline (vLLM's defaults)" not in status.stdout, status.stdout

    again = run_tuner(["enqueue", name, "--baseline", "default", "--storage", storage_url])
    assert again.returncode == 0 and "already" in again.stdout, again
    assert len(open_study(name, storage_url).study.get_trials(
        deepcopy=False, states=(TrialState.WAITING,))) == 1

    bad = run_tuner(["enqueue", name, "--baseline", "fastest", "--storage", storage_url])
    assert bad.returncode == 2, bad
    assert "--baseline fastest: no such baseline; choose one of default, article, " \
           "article-chunked" in bad.stderr

"""A trial whose measurement raises (here a usage error at benchmark time: the study's
ShareGPT dataset is gone) is recorded as failed with the error's text, not left running
with no worker; the worker then stops with the error's exit code. (A trace that is gone
is its own case: the trial fails with class "trace" and the worker goes on;
test_trace_files.py.)"""

from __future__ import annotations

import json

import pytest
from optuna.trial import TrialState

from tuner.storage import create_study, load_study_file
from tuner.testing.databases import sqlite_url
from tuner.testing.sim_studies import SIM, trials_of
from tuner.testing.worker_procs import start_worker
from tuner.trials.parts import FailureKind

pytestmark = pytest.mark.integration


def test_a_trial_whose_benchmark_raises_is_told_failed_with_the_reason(study_file, tmp_path):
    dataset = tmp_path / "sg.json"
    turns = [{"from": "human", "value": "hello there " * 8}, {"from": "gpt", "value": "hi " * 8}]
    dataset.write_text(json.dumps([{"conversations": turns}] * 20))
    text = SIM.format(n=8, trials=1, scale=4).replace(
        "[workload]\n", f'[workload]\nkind = "sharegpt"\ndataset = "{dataset}"\n')
    url = sqlite_url(tmp_path)
    create_study(load_study_file(study_file(text, "gone.toml")), url)
    dataset.unlink()  # there when the study was created, gone by the benchmark
    proc = start_worker("gone", url, "0", env={"TUNER_HOME": str(tmp_path)},
                        log=tmp_path / "worker.log")
    assert proc.wait(timeout=200) == 2, (tmp_path / "worker.log").read_text()[-3000:]
    [trial] = [t for t in trials_of("gone", url) if t.state != TrialState.WAITING]
    assert trial.state == TrialState.FAIL
    failure = trial.user_attrs["failure"]
    assert failure["class"] == FailureKind.ERROR
    assert "UsageError" in failure["message"] and "cannot read ShareGPT" in failure["message"]

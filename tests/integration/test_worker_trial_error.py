"""A trial whose measurement raises (here a usage error at benchmark time: the study's
trace is gone) is recorded as failed with the error's text, not left running with no
worker; the worker then stops with the error's exit code."""

from __future__ import annotations

import pytest
from optuna.trial import TrialState

from tuner.storage import create_study, load_study_file
from tuner.testing.databases import sqlite_url
from tuner.testing.sim_studies import SIM, trials_of
from tuner.testing.traces import TraceShape, write_trace
from tuner.testing.worker_procs import start_worker
from tuner.trials.parts import FailureKind

pytestmark = pytest.mark.integration


def test_a_trial_whose_benchmark_raises_is_told_failed_with_the_reason(study_file, tmp_path):
    trace = tmp_path / "t.jsonl"
    write_trace(trace, TraceShape(requests=20))
    text = SIM.format(n=8, trials=1, scale=4).replace(
        "[workload]\n", '[workload]\nkind = "trace"\ntrace = "t.jsonl"\n')
    url = sqlite_url(tmp_path)
    create_study(load_study_file(study_file(text, "gone.toml")), url)
    trace.unlink()  # read when the study was created, gone by the benchmark
    proc = start_worker("gone", url, "0", env={"TUNER_HOME": str(tmp_path)},
                        log=tmp_path / "worker.log")
    assert proc.wait(timeout=200) == 2, (tmp_path / "worker.log").read_text()[-3000:]
    [trial] = [t for t in trials_of("gone", url) if t.state != TrialState.WAITING]
    assert trial.state == TrialState.FAIL
    failure = trial.user_attrs["failure"]
    assert failure["class"] == FailureKind.ERROR
    assert "UsageError" in failure["message"] and "cannot read the trace" in failure["message"]

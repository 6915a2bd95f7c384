"""Trace replay in a study file: its path relative to the file, a bad trace the study
file's error, the simulator's offline model fed the trace's mean lengths. (The replay
against a real simulator server: ``test_sim_server.py``.)"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from optuna.trial import TrialState

from tuner.errors import StudyFileError, TraceError
from tuner.loadgen.trace import read_trace
from tuner.results.summary import environment
from tuner.sim.workload import from_study
from tuner.space import build_space
from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.databases import sqlite_url
from tuner.testing.popen import stopped
from tuner.testing.sim_studies import trials_of
from tuner.testing.worker_procs import start_worker
from tuner.trials import record

pytestmark = pytest.mark.integration
SYNTHETIC = Path(__file__).resolve().parents[2] / "examples" / "traces" / "synthetic-mooncake.jsonl"
STUDY = """
[model]
path = "models/llama3-8b"
[workload]
kind = "trace"
trace = "{trace}"
{more}
[engine]
kind = "sim"
"""


def _study(study_file, trace: str, more: str = "") -> Path:
    return study_file(STUDY.format(trace=trace, more=more))


def test_a_relative_trace_resolves_against_the_study_files_folder(study_file, tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.jsonl").write_text(SYNTHETIC.read_text())
    spec = load_study_file(_study(study_file, "traces/t.jsonl", "speedup = 2.5"))
    assert spec.workload.trace == str(tmp_path / "traces" / "t.jsonl")
    assert spec.workload.speedup == 2.5 and not spec.workload.arrivals().closed_loop
    told = dict(environment(spec, build_space(spec), ()))["Workload"]
    assert told.startswith(f"trace {spec.workload.trace} at speed-up 2.5, ")
    records = read_trace(SYNTHETIC)
    sim = from_study(spec.workload, 10)  # the offline model: the trace's mean lengths
    assert (sim.kind, sim.num_requests, sim.max_concurrency) == ("random", 10, 256)
    assert sim.input_len == round(sum(r.input_tokens for r in records) / len(records))
    assert sim.output_len == round(sum(r.output_tokens for r in records) / len(records))


@pytest.mark.parametrize("lines, words", [
    (None, "t.jsonl: cannot read the trace"),
    (['{"timestamp": 0, "input_length": 5, "output_length": 1}', '{"timestamp": 9}'],
     "t.jsonl: line 2: no 'input_length'"),
    (['{"timestamp": 0, "input_length": 8000, "output_length": 300}',
      '{"timestamp": 9, "input_length": 5, "output_length": 1}'],
     "key 'workload': the longest request needs 8300 tokens but the model's context is 8192"),
])
def test_a_bad_trace_is_the_study_files_error_naming_key_file_and_line(study_file, tmp_path,
                                                                       lines, words):
    if lines is not None:
        (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(StudyFileError) as e:
        load_study_file(_study(study_file, "t.jsonl"))
    assert str(e.value).startswith(f"{tmp_path / 's.toml'}: key 'workload")
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_a_trace_replay_study_runs_end_to_end_on_the_simulator(study_file, tmp_path):
    (tmp_path / "t.jsonl").write_text(SYNTHETIC.read_text())
    more = ("speedup = 5.0\nnum_requests = 40\nwarmup_requests = 2\nmax_client_lag_ms = 50\n"
            "min_gap_share = 0.0\n[search]\nn_trials = 1\n")
    spec = load_study_file(_study(study_file, "t.jsonl", more))
    url = sqlite_url(tmp_path)
    create_study(spec, url)
    proc = start_worker(spec.name, url, "0", env={"TUNER_HOME": str(tmp_path)},
                        log=tmp_path / "worker.log")
    assert proc.wait(timeout=240) == 0, (tmp_path / "worker.log").read_text()[-3000:]
    done = [t for t in trials_of(spec.name, url) if t.state == TrialState.COMPLETE]
    assert len(done) == 1 and done[0].user_attrs["outcome"] == record.MEASURED, [
        t.user_attrs.get("failure") for t in done]
    metrics = done[0].user_attrs["metrics"]
    records = read_trace(SYNTHETIC)[:40]
    assert metrics["completed"] == 40 and metrics["failed"] == 0
    assert metrics["total_output_tokens"] == sum(r.output_tokens for r in records)


def test_create_stores_the_traces_digest_and_a_pinned_digest_must_match(study_file, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(SYNTHETIC.read_text())
    spec = load_study_file(_study(study_file, "t.jsonl"))
    digest = hashlib.sha256(trace.read_bytes()).hexdigest()
    assert spec.workload.trace_sha256 == digest
    url = sqlite_url(tmp_path)
    create_study(spec, url)
    assert open_study(spec.name, url).spec.workload.trace_sha256 == digest
    with pytest.raises(StudyFileError, match="not the trace the study was made with"):
        load_study_file(_study(study_file, "t.jsonl", f'trace_sha256 = "{"0" * 64}"'))
    trace.write_text(SYNTHETIC.read_text() + SYNTHETIC.read_text().splitlines()[-1] + "\n")
    with pytest.raises(TraceError, match=f"{trace}: not the trace the study was made with"):
        read_trace(trace, digest)


def _gone(trace: Path) -> None:
    trace.unlink()


def _fifo(trace: Path) -> None:
    trace.unlink()
    os.mkfifo(trace)


def _changed(trace: Path) -> None:
    trace.write_text(SYNTHETIC.read_text().replace('"output_length": ', '"output_length": 1'))


@pytest.mark.parametrize("swap, words", [
    (_gone, "cannot read the trace: No such file"), (_fifo, "a FIFO, not a regular file"),
    (_changed, "not the trace the study was made with"),
], ids=["deleted", "fifo", "changed"])
def test_a_trace_gone_or_swapped_after_create_fails_the_trial_not_the_worker(
        study_file, tmp_path, swap, words):
    trace = tmp_path / "t.jsonl"
    trace.write_text(SYNTHETIC.read_text())
    more = ("speedup = 5.0\nnum_requests = 20\nwarmup_requests = 2\n[search]\nn_trials = 1\n"
            "baselines = false\n")
    spec = load_study_file(_study(study_file, "t.jsonl", more))
    url = sqlite_url(tmp_path)
    create_study(spec, url)
    swap(trace)
    proc = start_worker(spec.name, url, "0", env={"TUNER_HOME": str(tmp_path)},
                        log=tmp_path / "worker.log")
    try:
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            stopped(proc, 10)
    log = (tmp_path / "worker.log").read_text()[-3000:]
    trials = trials_of(spec.name, url)
    assert code == 0 and [t.state for t in trials] == [TrialState.FAIL], log
    failure = trials[0].user_attrs["failure"]
    assert failure["class"] == "trace" and failure["message"].startswith(f"{trace}: ")
    assert words in failure["message"], failure

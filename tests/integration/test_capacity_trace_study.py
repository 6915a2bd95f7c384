"""A capacity study on a trace workload end to end on the simulator: a real `tuner worker`
and `tuner sim serve`. The trial's benchmark replays the trace at the study's speed-up; each
ladder level replays it at the speed-up that offers the level's rate, and the curve, the
study's capacity and `tuner best` read in requests/s, as for any workload."""

from __future__ import annotations

import json

import pytest
from optuna.trial import TrialState

from tuner.loadgen.ladder import level_requests
from tuner.storage import create_study, load_study_file
from tuner.testing.databases import sqlite_url
from tuner.testing.sim_studies import SIM, trials_of
from tuner.testing.traces import TraceShape, write_trace
from tuner.testing.worker_procs import start_worker
from tuner.trials import record
from tuner.trials.curve import Curve

pytestmark = pytest.mark.integration
# Short prompts and replies, a few requests a second as recorded: the simulator serves
# many times that, so the ladder climbs well past the trace's own rate.
SHAPE = TraceShape(requests=200, input_median=128.0, output_median=24.0, max_input=512,
                   max_output=64)
LEVEL_S = 8
CAPACITY = f'''
[[objectives]]
metric = "capacity_rps"
direction = "maximize"
[capacity]
max_levels = 3
level_s = {LEVEL_S}
'''


def _trace_study(text: str) -> str:
    """``SIM`` on the trace ``t.jsonl``, replayed fast enough (and capped at the study's
    16 requests in flight) that the trial's benchmark saturates the server."""
    return text.replace("[workload]\n", '[workload]\nkind = "trace"\ntrace = "t.jsonl"\n'
                        "speedup = 50\n").replace("p99_itl_ms = 200",
                                                  "p99_itl_ms = 200\np99_ttft_ms = 2000")


def test_a_capacity_study_on_a_trace_climbs_in_speed_ups_and_tells_requests_a_second(
        study_file, tmp_path, run_cli, monkeypatch):
    write_trace(tmp_path / "t.jsonl", SHAPE)
    url = sqlite_url(tmp_path)
    spec = load_study_file(study_file(_trace_study(SIM.format(n=48, trials=1, scale=4))
                                      + CAPACITY, "trace-cap.toml"))
    assert spec.measures_capacity and spec.workload.speedup == 50
    create_study(spec, url)
    proc = start_worker("trace-cap", url, "0", env={"TUNER_HOME": str(tmp_path)},
                        log=tmp_path / "worker.log")
    assert proc.wait(timeout=400) == 0, (tmp_path / "worker.log").read_text()[-3000:]
    [trial] = [t for t in trials_of("trace-cap", url) if t.state != TrialState.WAITING]
    failure = trial.user_attrs.get("failure") or {}
    if failure.get("message") == "no value for capacity_rps":
        # a loaded machine: every level measured the client, so there is no capacity to
        # tell, and the trial says so rather than telling a guess
        assert all(lv.get("invalid_reason") for lv in trial.user_attrs["curve"]["levels"])
        return
    assert trial.state == TrialState.COMPLETE, trial.user_attrs.get("failure")
    assert trial.user_attrs["outcome"] == record.MEASURED, trial.user_attrs.get("failure")
    curve = Curve.of(trial.user_attrs["curve"])
    assert 1 <= len(curve.levels) <= 3 and curve.saturated_rps > 0
    assert curve.levels[0].offered_rps == pytest.approx(curve.saturated_rps / 2)
    for lv in curve.levels:  # each level: the trace's first rate x level_s requests
        if not lv.stopped_early:
            assert lv.requests == min(level_requests(lv.offered_rps, LEVEL_S),
                                      SHAPE.requests), lv
        assert lv.held is not None, lv  # judged, even where it measured the client
    if all(lv.invalid_reason is not None for lv in curve.levels):
        return  # a loaded machine: every level measured the client, nothing to fit
    assert trial.user_attrs["metrics"]["capacity_rps"] == curve.capacity_rps
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    code, out, err = run_cli("best", "trace-cap", "--storage", url, "--max-itl-p99", 200,
                             "--max-ttft-p99", 2000, "--format", "json")
    if curve.capacity_rps == 0:  # no level held on a loaded machine: nothing to answer
        assert code == 1 and "holds" in err, err
    else:
        assert code == 0, err
        assert json.loads(out)["answer"]["rate_rps"] == curve.capacity_rps

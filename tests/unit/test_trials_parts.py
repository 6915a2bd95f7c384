"""The typed parts of the trial record (tuner/trials/parts.py): the committed H200 studies
load, and every stored part and every trial's user attributes write back as stored."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import optuna
import pytest

from tuner.loadgen import prometheus
from tuner.loadgen.benchmark import BenchmarkResult
from tuner.runner.measure import ServerCrashed, ServerDied, ServerHung
from tuner.space.unreached import unbound_moves
from tuner.trials import from_frozen, queries
from tuner.trials.parts import (Accuracy, Failure, FailureKind, Interval, Repeat,
                                ServerView, VllmBench, Window)
from tuner.trials.record import PARTS, TrialRecord, failed

ROOT = Path(__file__).resolve().parents[2]
STUDIES = (ROOT / "results/h200/study.db", ROOT / "results/h200/round2/study.db",
           ROOT / "results/h200/calibration/study.db",
           ROOT.parent / "shared/h200-2026-12-01/study.db")


def _text(value) -> str:
    """JSON as stored, up to key order (an int written back as a float differs)."""
    return json.dumps(value, sort_keys=True)


def _trials(path: Path, tmp_path: Path) -> list[optuna.trial.FrozenTrial]:
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    copy = tmp_path / "study.db"  # the committed file is never opened for writing
    shutil.copyfile(path, copy)
    url = f"sqlite:///{copy}"
    return [t for name in optuna.get_all_study_names(url)
            for t in optuna.load_study(study_name=name, storage=url).get_trials()]


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: "/".join(p.parts[-3:]))
def test_a_stored_trial_writes_back_its_user_attributes_as_stored(path, tmp_path):
    trials = _trials(path, tmp_path)
    assert trials
    for t in trials:
        for r in (from_frozen(t), TrialRecord.from_user_attrs(t.user_attrs)):
            assert _text(r.to_user_attrs()) == _text(t.user_attrs), t.number


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: "/".join(p.parts[-3:]))
def test_every_stored_part_is_typed_and_round_trips(path, tmp_path):
    seen = set()
    for t in _trials(path, tmp_path):
        r = from_frozen(t)
        for name, part in PARTS.items():
            stored = t.user_attrs.get(name)
            if stored is None:
                continue
            seen.add(name)
            assert isinstance(getattr(r, name), part)
            assert _text(part.from_json(stored).to_json()) == _text(stored)
        for run, stored in zip(r.repeats, t.user_attrs.get("repeats", ())):
            seen.add("repeats")
            assert isinstance(run, Repeat) and isinstance(run.window, (Window, type(None)))
            assert _text(Repeat.from_json(stored).to_json()) == _text(stored)
        for part in (r.window, r.server, r.client, r.start_phases, r.vllm_bench):
            if part is not None:  # every stored key is a field (a null is kept aside)
                assert all(v is None for v in part.extra.values()), part.extra
    assert {"server", "client"} <= seen


def test_the_server_view_has_a_field_for_each_key_of_the_metrics_page():
    before = {name: 10.0 for name in prometheus.COUNTERS.values()}
    after = {name: 13.0 for name in prometheus.COUNTERS.values()}
    peaks = {name: 0.5 for name in prometheus.GAUGES.values()}
    stored = prometheus.server_view(before, after, peaks)
    view = ServerView.from_json(stored)
    assert view.extra == {} and view.to_json() == stored
    assert set(stored) == set(prometheus.COUNTERS) | set(prometheus.GAUGES)
    assert view.preemptions == 3.0 and view.running_peak == 0.5


def test_the_search_reads_a_view_as_it_reads_the_stored_map():
    space = {"max_num_seqs": optuna.distributions.IntDistribution(8, 1024)}
    ran = {"max_num_seqs": 512}
    stored = {"running_peak": 40.0, "kv_cache_usage_peak": 0.5, "preemptions": 0.0}
    moves = unbound_moves(ran, ServerView.from_json(stored), space, {"enforce_eager": True})
    assert moves == unbound_moves(ran, stored, space, {"enforce_eager": True})
    assert [m["max_num_seqs"] for m in moves] == [1024, 45]


def test_a_failure_is_stored_under_class_and_its_kind_is_typed():
    stored = {"class": "hang", "message": "no result", "returncode": None, "log_tail": ""}
    f = Failure.from_json(stored)
    assert f.kind is FailureKind.HANG and f.message == "no result"
    assert f.to_json() == stored  # the stored null is kept
    other = Failure.from_json({"class": "no_kv_memory", "message": ""})
    assert other.kind == "no_kv_memory" and other.to_json()["class"] == "no_kv_memory"
    told = failed({"class": "invalid-measurement", "message": "the client lagged"},
                  TrialRecord())
    assert isinstance(told.failure, Failure) and queries.measured_the_client(told)
    assert told.to_user_attrs()["failure"] == {"class": "invalid-measurement",
                                               "message": "the client lagged"}


def test_a_crash_and_a_hang_are_told_apart_by_their_type():
    assert issubclass(ServerCrashed, ServerDied) and issubclass(ServerHung, ServerDied)
    assert ServerHung("no result in time").kind is FailureKind.HANG
    assert ServerCrashed("benchmark hung up").kind is FailureKind.CRASH_DURING_BENCHMARK


def test_a_window_reads_its_intervals_and_keeps_an_older_shape():
    old = {"start": 1.0, "end": 3.5, "requests": 10, "batches": 2,
           "output_throughput": {"value": 5.0, "half_width": 1.0, "rel": 0.2},
           "p99_itl_ms": None, "itl_metric": "itl", "seconds": 2.5}
    w = Window.from_json(old)
    assert w.output_throughput == Interval(value=5.0, half_width=1.0, rel=0.2)
    assert w.p99_itl_ms is None and w.requests == 10
    assert json.dumps(w.to_json(), sort_keys=True) == json.dumps(old, sort_keys=True)


def test_vllm_bench_keeps_vllm_figures_free_form():
    stored = {"output_throughput": 10.0, "completed": 5, "runs": [{"completed": 5}],
              "repeat_error": "exited 1"}
    v = VllmBench.from_json(stored)
    assert v.get("completed") == 5 and v.runs == [{"completed": 5}]
    assert v.repeat_error == "exited 1" and v.to_json() == stored


def test_a_record_built_with_maps_holds_parts_and_an_empty_part_is_falsy():
    r = TrialRecord(server={}, accuracy={"role": "replay", "token_agreement": 0.99})
    assert isinstance(r.server, ServerView) and not r.server
    assert r.accuracy == Accuracy(role="replay", token_agreement=0.99)
    assert r.to_user_attrs() == {"server": {}, "accuracy": {"role": "replay",
                                                            "token_agreement": 0.99}}


def test_a_benchmark_result_is_built_with_keywords_and_is_frozen():
    fields = dict(metrics={}, failures={}, server={}, client={}, valid=True,
                  invalid_reason=None, noise={})
    with pytest.raises(TypeError):
        BenchmarkResult(*fields.values())
    result = BenchmarkResult(**fields)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.valid = False

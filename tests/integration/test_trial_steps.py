"""The trial's plans and steps: ``measure`` reads a compiled plan, runs the steps after the
benchmark in order on the same live server, and skips the rest once a step fails the trial
(a real fake-engine process on loopback, started as `vllm serve` is)."""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

import pytest

from tuner.engine.ports import free_port as _free_port
from tuner.runner.measure import Slot, Step, measure
from tuner.runner.plans import compile_trial
from tuner.spec.study import (EngineSection, ModelSection, Objective, StudySpec,
                              WorkloadSection)
from tuner.trials import record
from tuner.trials.parts import Failure, FailureKind

pytestmark = pytest.mark.integration


def _study(tmp_path: Path) -> StudySpec:
    # Steps run only after a benchmark the trial keeps. On a loaded host the client reads
    # the fake's tokens late and coalesced (a CI run refused it for its gap share), and
    # these tests are about the steps: every gap share is accepted.
    command = [sys.executable, "-m", "tuner.testing.fake_server", "--ttft-ms", "5",
               "--itl-ms", "10"]
    return StudySpec(
        name="steps", model=ModelSection(path=str(tmp_path / "m"), served_name="fake-model",
                                         vocab_size=1000, context_len=4096),
        workload=WorkloadSection(input_len=16, output_len=8, max_concurrency=4,
                                 num_requests=12, warmup_requests=0,
                                 max_client_lag_ms=1000.0, min_gap_share=0.0),
        objectives=[Objective(metric="output_throughput", direction="maximize"),
                    Objective(metric="p99_itl_ms", direction="minimize")],
        engine=EngineSection(command=command, extra_args=[], start_timeout_s=30))


def test_the_plan_holds_what_the_trial_reads(tmp_path):
    plan = compile_trial(_study(tmp_path), {"max_num_seqs": 8}, 12345, (0,))
    assert plan.engine.port == 12345 and plan.engine.model == "fake-model"
    assert "--max-num-seqs" in plan.engine.launch.argv
    assert plan.engine.launch.env["CUDA_VISIBLE_DEVICES"] == "0"
    assert plan.benchmark.told == ("output_throughput", "p99_itl_ms")
    assert plan.scoring.metrics == ("output_throughput", "p99_itl_ms")
    assert plan.benchmark.for_run(1).seed != plan.benchmark.for_run(0).seed


def test_steps_run_in_order_on_the_live_server_until_one_fails_the_trial(tmp_path):
    spec = _study(tmp_path)
    plan = compile_trial(spec, {}, _free_port(), ())
    seen: list[str] = []

    def alive(name):
        def run(server, told, phase):
            phase(name)
            with urllib.request.urlopen(server.url + "/health", timeout=5) as r:
                seen.append(f"{name}:{r.status}")
            return told
        return run

    def fail(server, told, phase):
        seen.append("fail")
        return record.failed(Failure(kind=FailureKind.BENCHMARK_FAILED, message="step"),
                             told)

    phases: list[str] = []
    steps = [Step("first", alive("first")),
             Step("skipped", alive("skipped"), applies=lambda told: False),
             Step("fail", fail), Step("after", alive("after"))]
    told = measure(plan, Slot(gpus=(), logs=tmp_path, worker="w", host="h"),
                   record.TrialRecord(), phases.append, steps)
    assert seen == ["first:200", "fail"], (told.outcome, told.failure)
    assert told.outcome == record.FAILED and told.failure.message == "step"
    assert told.metrics["completed"] == 12  # the benchmark's figures stay on the record
    assert {"start", "benchmark", "first", "fail", "stop"} <= set(told.phases)
    assert "skipped" not in told.phases and "after" not in told.phases
    assert phases[:2] == ["start", "benchmark"] and "first" in phases


def test_a_start_that_fails_is_scored_by_the_plan(tmp_path):
    spec = _study(tmp_path)
    spec = spec.model_copy(update={"engine": spec.engine.model_copy(update={"command": [
        sys.executable, "-c", "raise SystemExit(3)"]})})
    plan = compile_trial(spec, {}, _free_port(), ())
    told = measure(plan, Slot(gpus=(), logs=tmp_path, worker="w", host="h"),
                   record.TrialRecord(), lambda _p: None, [Step("never", lambda *a: 1 / 0)])
    assert told.outcome == record.INFEASIBLE
    assert told.values == tuple(g.worst for g in plan.scoring.goals)
    assert "never" not in told.phases

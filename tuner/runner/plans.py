"""The study compiled into one trial's frozen plans: the engine's (argv, environment,
limits), the benchmark's (requests, arrivals and stopping, SLOs, clock) and the scoring's
(objectives, SLO limits, worst values, accuracy floor). The trial pipeline reads these and
never the whole study."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from tuner.engine import command
from tuner.engine.plan import EnginePlan
from tuner.loadgen import SLO, LoadSpec, WorkloadSpec, gaps
from tuner.loadgen.ladder import LadderPlan
from tuner.loadgen.plan import BenchmarkPlan
from tuner.loadgen.spec import DEFAULT_VOCAB_SIZE
from tuner.spec.study import CAPACITY_METRICS, REFERENCE_METRICS, StudySpec
from tuner.trials.scoring import Scoring


@dataclass(frozen=True)
class TrialPlan:
    engine: EnginePlan
    benchmark: BenchmarkPlan
    scoring: Scoring


def workload_of(spec: StudySpec) -> WorkloadSpec:
    """The study's requests; token ids below the model's vocabulary."""
    return spec.workload.requests(vocab_size=spec.model.vocab_size or DEFAULT_VOCAB_SIZE)


def told_metrics(spec: StudySpec) -> list[str]:
    """The metrics a trial tells the study: its objectives, then its SLOs."""
    return list(Scoring.of(spec).told())


def itl_metric_of(spec: StudySpec) -> str:
    """The ITL the steady window's interval is about: per token when the study tells one."""
    return "itl_per_token" if any(gaps.family(m) == gaps.PER_TOKEN and "itl" in m
                                  for m in told_metrics(spec)) else "itl"


def load_of(spec: StudySpec) -> LoadSpec:
    """The study's arrivals, stopped as its [measurement] says."""
    return spec.workload.arrivals(**spec.measurement.model_dump(),
                                  itl_metric=itl_metric_of(spec))


def slo_of(spec: StudySpec) -> SLO:
    """Every latency limit the study sets: the ladder judges each at every level, and
    goodput counts the requests within the TTFT, TPOT and E2EL ones (as vLLM's)."""
    s = spec.slo
    return SLO(ttft_p99_ms=s.p99_ttft_ms, itl_p99_ms=s.p99_itl_ms, tpot_ms=s.p99_tpot_ms,
               e2el_ms=s.p99_e2el_ms)


def ladder_of(spec: StudySpec) -> LadderPlan | None:
    """The study's load ladder (its first level at the reference rate), or None."""
    if not spec.measures_capacity:
        return None
    c = spec.capacity
    return LadderPlan(tolerance=c.tolerance, max_levels=c.max_levels,
                      start_rate=c.reference_rate)


def benchmark_plan(spec: StudySpec) -> BenchmarkPlan:
    capacity = set(CAPACITY_METRICS + REFERENCE_METRICS)
    return BenchmarkPlan(model=command.served_name(spec), workload=workload_of(spec),
                         load=load_of(spec), slo=slo_of(spec),
                         told=tuple(m for m in told_metrics(spec) if m not in capacity),
                         time_scale=spec.engine.time_scale,
                         timeout_s=spec.engine.benchmark_timeout_s, ladder=ladder_of(spec),
                         level_s=spec.capacity.level_s)


def engine_plan(spec: StudySpec, launch_flags: Mapping[str, Any], port: int,
                gpus: Sequence[int], cache_root: Path | None,
                inherited: Mapping[str, str]) -> EnginePlan:
    launch = command.launch(spec, launch_flags, port, gpus, cache_root=cache_root,
                            inherited=inherited)
    label = (f"{spec.hardware.gpu} (simulated)" if spec.engine.kind == "sim"
             else spec.hardware.gpu)
    return EnginePlan(kind=spec.engine.kind, launch=launch, port=port,
                      model=command.served_name(spec),
                      start_timeout_s=spec.engine.start_timeout_s,
                      stop_grace_s=spec.engine.stop_grace_s, gpu_label=label)


def compile_trial(spec: StudySpec, launch_flags: Mapping[str, Any], port: int,
                  gpus: Sequence[int], cache_root: Path | None = None,
                  inherited: Mapping[str, str] | None = None) -> TrialPlan:
    """The trial's plans: ``launch_flags`` served on ``port`` with ``gpus``."""
    return TrialPlan(engine_plan(spec, launch_flags, port, gpus, cache_root, inherited or {}),
                     benchmark_plan(spec), Scoring.of(spec))

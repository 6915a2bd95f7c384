"""Measuring one configuration: start its server, wait for health, benchmark, stop.

Returns the told ``TrialRecord`` (see ``tuner.trials.record``) and never raises for a server's failure: a server
that exits or never becomes ready is an infeasible configuration, a crash or hang during the
benchmark a failed trial; both keep the log tail. KeyboardInterrupt (Ctrl-C, SIGTERM) stops
the server and propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from tuner.errors import EngineError, EngineExitedError
from tuner.loadgen import SLO, LoadSpec, WorkloadSpec, gaps, run_benchmark
from tuner.loadgen.spec import DEFAULT_VOCAB_SIZE
from tuner.runner import confirm as confirmation
from tuner.runner import crosscheck
from tuner.engine import command as engine, gpu, logparse, startlog
from tuner.runner.guard import Guard
from tuner.runner.interrupts import deferred_interrupts, run_interruptible
from tuner.engine.ports import free_port
from tuner.engine.supervisor import Server
from tuner.spec.study import StudySpec
from tuner.trials import record
from tuner.trials.parts import Failure, FailureKind
from tuner.trials.record import TrialRecord

Phase = Callable[[str], None]
# Given a first valid run's metrics: how many confirmation runs to add (search.confirm).
Confirm = Callable[[Mapping[str, float]], int]


@dataclass(frozen=True)
class Slot:
    """Where a worker runs its trials: GPUs, log folder, identity."""

    gpus: tuple[int, ...]
    logs: Path
    worker: str
    host: str
    crosscheck: bool = False
    cache: Path | None = None  # the box's compile caches (engine.cache_env)


# Benchmark runs repeated on the same server when the client was the bottleneck, each
# after a pause: the load that starved the client (a neighbour's job) is often gone by then.
INVALID_RETRIES = 2
INVALID_PAUSE_S = 1.0


class ServerDied(EngineError):
    """The server stopped serving during a benchmark: ``kind`` says how."""

    kind = FailureKind.CRASH_DURING_BENCHMARK


class ServerCrashed(ServerDied):
    """The server exited during the benchmark."""


class ServerHung(ServerDied):
    """The benchmark gave no result within the study's timeout."""

    kind = FailureKind.HANG


def workload_of(spec: StudySpec) -> WorkloadSpec:
    """The study's requests; token ids below the model's vocabulary."""
    return spec.workload.requests(vocab_size=spec.model.vocab_size or DEFAULT_VOCAB_SIZE)


def itl_metric_of(spec: StudySpec) -> str:
    """The ITL the steady window's interval is about: per token when the study tells one."""
    told = told_metrics(spec)
    return "itl_per_token" if any(gaps.family(m) == gaps.PER_TOKEN and "itl" in m
                                  for m in told) else "itl"


def load_of(spec: StudySpec) -> LoadSpec:
    """The study's arrivals, stopped as its [measurement] says."""
    return spec.workload.arrivals(**spec.measurement.model_dump(),
                                  itl_metric=itl_metric_of(spec))


def told_metrics(spec: StudySpec) -> list[str]:
    """The metrics a trial tells the study: its objectives, then its SLOs."""
    return [o.metric for o in spec.objectives] + list(spec.slo.limits())


def slo_of(spec: StudySpec) -> SLO:
    s = spec.slo
    return SLO(ttft_p99_ms=s.p99_ttft_ms, itl_p99_ms=s.p99_itl_ms)


def _server_version(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url + "/version", timeout=5) as resp:
            return str(json.loads(resp.read()).get("version"))
    except Exception:  # a server without /version: the log may still say
        return None


# Each further run on the same server (a retry, a confirmation) draws prompts of its own:
# the same prompts again would be served from the prefix cache and measure faster.
RUN_SEED_STEP = 7_919


async def _watched_benchmark(server: Server, spec: StudySpec, phase: Phase, run: int = 0):
    """The benchmark (the server's ``run``-th), cancelled as soon as the server dies or the
    time runs out."""
    workload = workload_of(spec)
    workload = workload.model_copy(update={"seed": workload.seed + run * RUN_SEED_STEP})
    task = asyncio.ensure_future(run_benchmark(
        server.url, engine.served_name(spec), workload, load_of(spec),
        slo=slo_of(spec), time_scale=spec.engine.time_scale))
    start = time.monotonic()
    while not task.done():
        await asyncio.wait({task}, timeout=0.5)
        if task.done():
            break
        if server.returncode() is not None:
            task.cancel()
            raise ServerCrashed(f"server exited with code {server.returncode()} during "
                                "the benchmark")
        if time.monotonic() - start > spec.engine.benchmark_timeout_s:
            task.cancel()
            raise ServerHung(f"benchmark hung: no result within "
                             f"{spec.engine.benchmark_timeout_s:.0f} s")
    return task.result()


def _failure(kind: FailureKind | str, message: str, server: Server) -> Failure:
    """The failure with the server's exit code (stored also when None), log tail and log."""
    return Failure.from_json({"class": kind, "message": message,
                              "returncode": server.returncode(),
                              "log_tail": logparse.tail(server.log()),
                              "log": str(server.log_path)})


@contextlib.contextmanager
def _timed(phases: dict[str, float], name: str):
    """Record how long the block took as phase ``name`` (when it completes)."""
    t0 = time.monotonic()
    yield
    phases[name] = time.monotonic() - t0


def measure(spec: StudySpec, flags: Mapping[str, Any], launch_flags: Mapping[str, Any],
            number: int, slot: Slot, base: TrialRecord, phase: Phase,
            confirm: Confirm | None = None, guard: Guard | None = None) -> TrialRecord:
    """Run one configuration end to end and say what to tell the study; ``guard`` checks a
    measured trial's outputs afterwards (``tuner.runner.guard``), timed as phase
    ``accuracy``."""
    port = free_port()
    launch = engine.launch(spec, launch_flags, port, slot.gpus, cache_root=slot.cache,
                           inherited=os.environ)
    server = Server(launch, port, slot.logs / f"trial-{number:05d}.log")
    base = dataclasses.replace(base, command=tuple(launch.argv), engine=spec.engine.kind,
                               gpus=tuple(slot.gpus), log=str(server.log_path))
    phases: dict[str, float] = {}
    gpu_before = gpu.used_mib(slot.gpus)
    told: TrialRecord | None = None
    try:
        phase("start")
        server.start()
        try:
            phases["start"] = server.wait_healthy(spec.engine.start_timeout_s)
        except EngineError as e:
            code = e.returncode if isinstance(e, EngineExitedError) else None
            kind = logparse.classify_start_failure(code, server.log())
            told = record.infeasible(spec, _failure(kind, str(e), server), base)
        if told is None:
            told = _benchmark(spec, server, base, phases, phase)
            if confirm is not None and told.outcome == record.MEASURED:
                with _timed(phases, "confirm"):
                    told = _confirm(spec, server, told, confirm(told.metrics), phase)
            if guard is not None and told.outcome == record.MEASURED and guard.role(spec, told):
                phase("accuracy")
                with _timed(phases, "accuracy"):
                    told = guard.check(spec, server.url, engine.served_name(spec), told, number)
            if slot.crosscheck and told.outcome == record.MEASURED:
                phase("crosscheck")
                with _timed(phases, "crosscheck"):
                    env = engine.engine_environment(os.environ, launch)
                    vllm = crosscheck.run(spec, server.url, engine.served_name(spec), env,
                                          crosscheck.num_prompts(told))
                told = dataclasses.replace(told, vllm_bench=vllm)
    finally:
        # A measurement is worth keeping: an interrupt while the server stops is held
        # until the trial is told (the server is stopped either way).
        with deferred_interrupts() as held:
            phase("stop")
            phases["stop"] = server.stop(spec.engine.stop_grace_s)
            released = gpu.wait_released(slot.gpus, gpu_before)
            if released is not None:
                phases["gpu_release"] = released
    if held.pending and told is None:
        raise KeyboardInterrupt
    log = server.log()
    gpu_name = (gpu.name(slot.gpus[0]) if slot.gpus else None) or (
        f"{spec.hardware.gpu} (simulated)" if spec.engine.kind == "sim" else spec.hardware.gpu)
    # Both change what the client sees (tokens a message, the step's timing): on every trial.
    return dataclasses.replace(
        told, kv_cache_tokens=logparse.kv_cache_tokens(log), phases=phases,
        start_phases=startlog.with_process_start(startlog.start_phases(log),
                                                 phases.get("start")),
        vllm_version=told.vllm_version or logparse.vllm_version(log), gpu_name=gpu_name,
        interrupted=bool(held.pending),
        async_scheduling=logparse.async_scheduling(log, dict(launch_flags)),
        stream_interval=logparse.stream_interval(log, dict(launch_flags)))


def _benchmark(spec: StudySpec, server: Server, base: TrialRecord, phases: dict,
               phase: Phase) -> TrialRecord:
    base = dataclasses.replace(base, vllm_version=_server_version(server.url))
    phase("benchmark")
    start = time.monotonic()
    rejected: list[str] = []
    try:
        for attempt in range(1 + INVALID_RETRIES):
            result = run_interruptible(_watched_benchmark(server, spec, phase, attempt))
            invalid = result.invalid_for(told_metrics(spec))
            if invalid is None or not result.metrics.get("completed"):
                break
            if not (result.lag_reason or result.metrics.get("coalesced_reads")):
                break  # the server's own batching: another run would see the same
            # The client, not the server, was measured: the server is still up, so run the
            # benchmark again rather than spend a trial.
            rejected.append(invalid)
            phase(f"benchmark again ({invalid.split(' (')[0]})")  # why, less the remedy
            time.sleep(INVALID_PAUSE_S)
    except ServerDied as e:
        phases["benchmark"] = time.monotonic() - start
        return record.failed(_failure(e.kind, str(e), server), base)
    phases["benchmark"] = time.monotonic() - start
    if "warmup_s" in result.client:
        phases["warmup"] = result.client["warmup_s"]
    metrics = {k: v for k, v in result.metrics.items() if isinstance(v, (int, float))}
    base = dataclasses.replace(base, rejected_runs=tuple(rejected), server=result.server,
                               client=result.client, noise=result.noise,
                               failures=result.failures, window=result.window,
                               stop_reason=result.stop_reason)
    ran = dataclasses.replace(base, metrics=metrics)
    if server.returncode() is not None:
        return record.failed(_failure(FailureKind.CRASH_DURING_BENCHMARK, "server exited with "
                                      f"code {server.returncode()} during the benchmark",
                                      server), ran)
    if not metrics.get("completed"):
        reasons = ", ".join(f"{k} x{v}" for k, v in result.failures.items()) or "none completed"
        return record.failed(_failure(FailureKind.BENCHMARK_FAILED,
                                      f"no request completed: {reasons}", server), ran)
    if invalid is not None:  # never told: a p99 ITL of 0 would win the latency objective
        return record.failed(Failure(kind=FailureKind.INVALID_MEASUREMENT, message=invalid),
                             ran)
    missing = [o.metric for o in spec.objectives if o.metric not in metrics]
    if missing:
        why = (": the steady window was too short for an interval (more requests, or "
               "measurement.early_stop)" if any(m.startswith("steady_") for m in missing)
               else "")
        return record.failed(Failure(kind=FailureKind.BENCHMARK_FAILED,
                                     message=f"no value for {', '.join(missing)}{why}"), ran)
    return record.measured(spec, metrics, base)


def _confirm(spec: StudySpec, server: Server, told: TrialRecord, n: int,
             phase: Phase) -> TrialRecord:
    """Benchmark ``n`` more times on the same server; tell the medians, keep every run."""
    if n <= 0:
        return told
    names = [o.metric for o in spec.objectives]
    first = dict(told.metrics)
    runs = [confirmation.repetition(first, names, told.window)]
    rejected = list(told.rejected_runs)
    for k in range(n):
        phase(f"confirm {k + 1}/{n}")
        try:
            result = run_interruptible(_watched_benchmark(server, spec, phase,
                                                    1 + INVALID_RETRIES + k))
        except ServerDied as e:
            rejected.append(f"confirmation run: {e}")
            break
        invalid = result.invalid_for(told_metrics(spec))
        if invalid is not None or any(m not in result.metrics for m in names):
            rejected.append(f"confirmation run: {invalid or 'missing objective'}")
            continue
        runs.append(confirmation.repetition(result.metrics, names, result.window))
    values = [r["metrics"] for r in runs]
    base = dataclasses.replace(told, repeats=tuple(runs), rejected_runs=tuple(rejected),
                               spread=confirmation.spread(values, names))
    return record.measured(spec, confirmation.medians(first, values, names), base)

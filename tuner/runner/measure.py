"""Measuring one configuration: start its server, wait for health, benchmark, the trial's
further steps, stop.

``measure`` reads the trial's plans (``tuner.runner.plans``), never the study. Its steps
after the benchmark (confirmation runs, the accuracy guard, the cross-check) are
``Step``s: each takes the running server and the told record and returns the record, and
runs only while the trial is measured. Returns the told ``TrialRecord`` (see
``tuner.trials.record``) and never raises for a server's failure: a server that exits or
never becomes ready is an infeasible configuration, a crash or hang during the benchmark a
failed trial; both keep the log tail. A trace file that cannot be replayed at bench time
(gone, changed since the study was created: ``TraceError``) fails the trial with that
reason (``FailureKind.TRACE``), as a run of no result would. KeyboardInterrupt (Ctrl-C, SIGTERM) stops the server
and propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from tuner.engine import gpu, logparse, startlog
from tuner.clock import SYSTEM, Clock
from tuner.engine.supervisor import Engine, Starter, process_starter
from tuner.errors import EngineError, EngineExitedError, TraceError
from tuner.capacity.run import level_load, level_of, run_ladder
from tuner.loadgen import run_benchmark
from tuner.loadgen.benchmark import Bench, BenchmarkResult
from tuner.loadgen.ladder import LadderPlan
from tuner.runner import confirm as confirmation
from tuner.runner.interrupts import deferred_interrupts, run_interruptible
from tuner.runner.plans import TrialPlan
from tuner.trials import record
from tuner.trials.curve import Level, objective_figures
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


@dataclass(frozen=True)
class Rig:
    """The seams a trial runs on: ``starter`` starts its engine, ``bench`` runs each
    benchmark and ladder level on it, ``clock`` times the phases and the pauses. The
    product's are a supervised process, the load generator and the system clock; an
    in-process tier gives its own (``tuner.testing.sim_bench``). ``starter`` None: the
    trial's own (``tuner.runner.trial``: plain or pre-imported)."""

    starter: Starter | None = None
    bench: Bench = run_benchmark
    clock: Clock = SYSTEM


# The ladder's prompts: a run number of their own, past any retry or confirmation run.
LADDER_RUN = 1_000
CROSSCHECK_RUN = 2_000  # our levels beside `vllm bench serve` (tuner.runner.crosscheck)

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


def _server_version(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url + "/version", timeout=5) as resp:
            return str(json.loads(resp.read()).get("version"))
    except Exception:  # a server without /version: the log may still say
        return None


async def _watched(server: Engine, work, timeout_s: float, what: str = "benchmark"):
    """``work`` (a coroutine) on the live server, cancelled as soon as the server dies or
    ``timeout_s`` runs out."""
    task = asyncio.ensure_future(work)
    start = time.monotonic()
    while not task.done():
        await asyncio.wait({task}, timeout=0.5)
        if task.done():
            break
        if server.returncode() is not None:
            task.cancel()
            raise ServerCrashed(f"server exited with code {server.returncode()} during "
                                f"the {what}")
        if time.monotonic() - start > timeout_s:
            task.cancel()
            raise ServerHung(f"{what} hung: no result within {timeout_s:.0f} s")
    return task.result()


def _watched_benchmark(server: Engine, plan: TrialPlan, run: int = 0,
                       bench: Bench = run_benchmark):
    """The benchmark (the server's ``run``-th), watched."""
    b = plan.benchmark
    return _watched(server, bench(server.url, b.model, b.for_run(run), b.load, slo=b.slo,
                                  time_scale=b.time_scale), b.timeout_s)


def _ladder(server: Engine, plan: TrialPlan, warmup: BenchmarkResult, phase: Phase,
            bench: Bench):
    """The load ladder after the saturated benchmark ``warmup`` (``run_ladder``), watched;
    its progress told as phases ``ladder k/n at R req/s``."""
    b = plan.benchmark

    def on_level(k: int, n: int, rate: float) -> None:
        phase(f"ladder {k}/{n} at {rate:.3g} req/s")

    return _watched(server, run_ladder(
        server.url, b.model, b.for_run(LADDER_RUN), b.load, b.slo, b.ladder,
        level_s=b.level_s, on_level=on_level, time_scale=b.time_scale, warmup=warmup,
        bench=bench), b.timeout_s, "ladder")


def one_level(server: Engine, plan: TrialPlan, rate: float, run: int) -> Level:
    """One open-loop level at ``rate`` requests/s on the live ``server``, as the ladder
    measures it (``level_s`` seconds of arrivals, the server's ``run``-th prompts),
    watched; ServerDied when the server dies or hangs during it."""
    bench = plan.benchmark
    load = level_load(bench.load, rate, bench.level_s, bench.time_scale,
                      workload=bench.workload)
    result = run_interruptible(_watched(server, run_benchmark(
        server.url, bench.model, bench.for_run(run), load, slo=bench.slo,
        time_scale=bench.time_scale), bench.timeout_s, "cross-check level"))
    tolerance = bench.ladder.tolerance if bench.ladder is not None else LadderPlan.tolerance
    return level_of(rate, result, bench.slo.judged(tolerance))


def _failure(kind: FailureKind | str, message: str, server: Engine) -> Failure:
    """The failure with the server's exit code (stored also when None), log tail and log."""
    return Failure.from_json({"class": kind, "message": message,
                              "returncode": server.returncode(),
                              "log_tail": logparse.tail(server.log()),
                              "log": str(server.log_path)})


@contextlib.contextmanager
def _timed(phases: dict[str, float], name: str, clock: Clock = SYSTEM):
    """Record how long the block took as phase ``name`` (when it completes)."""
    t0 = clock.monotonic()
    yield
    phases[name] = clock.monotonic() - t0


# Phases timed within another phase (the benchmark's warm-up requests), not beside it.
NESTED_PHASES = frozenset({"warmup"})


def with_overhead(phases: Mapping[str, float], total: float) -> dict[str, float]:
    """``phases`` with the trial's ``total`` and its ``overhead``: the part of the total
    that no phase timed (asking, proposing, telling). Every phase the trial timed counts
    (the ladder, each step), but none twice (``NESTED_PHASES``)."""
    timed = sum(v for k, v in phases.items() if k not in NESTED_PHASES)
    return {**phases, "total": total, "overhead": max(0.0, total - timed)}


@dataclass(frozen=True)
class Step:
    """A step after the benchmark, on the same server: ``applies`` to a measured record,
    then ``run(server, record, phase)`` returns the record to tell; timed as phase ``name``."""

    name: str
    run: Callable[[Engine, TrialRecord, Phase], TrialRecord]
    applies: Callable[[TrialRecord], bool] = lambda _told: True


def measure(plan: TrialPlan, slot: Slot, base: TrialRecord, phase: Phase,
            steps: Sequence[Step] = (), log_name: str = "trial",
            rig: Rig = Rig()) -> TrialRecord:
    """Run one configuration end to end and say what to tell the study: start the plan's
    engine (with ``rig.starter``: a supervised process, by default a plain one), benchmark
    it (``rig.bench``), then each of ``steps`` while the trial stays measured; stop."""
    launch = plan.engine.launch
    log_path = slot.logs / f"{log_name}.log"
    start_engine = rig.starter or process_starter()
    base = dataclasses.replace(base, command=tuple(launch.argv), engine=plan.engine.kind,
                               gpus=tuple(slot.gpus), log=str(log_path))
    phases: dict[str, float] = {}
    gpu_before = gpu.used_mib(slot.gpus)
    told: TrialRecord | None = None
    server: Engine | None = None
    try:
        phase("start")
        server = start_engine(launch, plan.engine.port, log_path, slot.gpus)
        try:
            phases["start"] = server.wait_healthy(plan.engine.start_timeout_s)
        except EngineError as e:
            code = e.returncode if isinstance(e, EngineExitedError) else None
            kind = logparse.classify_start_failure(code, server.log())
            told = record.infeasible(plan.scoring, _failure(kind, str(e), server), base)
        if told is None:
            told = benchmark(plan, server, base, phases, phase, rig)
            for step in steps:
                if told.outcome == record.MEASURED and step.applies(told):
                    with _timed(phases, step.name, rig.clock):
                        told = step.run(server, told, phase)
    finally:
        # A measurement is worth keeping: an interrupt while the server stops is held
        # until the trial is told (the server is stopped either way).
        with deferred_interrupts() as held:
            phase("stop")
            if server is not None:
                phases["stop"] = server.stop(plan.engine.stop_grace_s)
            released = gpu.wait_released(slot.gpus, gpu_before)
            if released is not None:
                phases["gpu_release"] = released
    if held.pending and told is None:
        raise KeyboardInterrupt
    log = server.log()
    gpu_name = (gpu.name(slot.gpus[0]) if slot.gpus else None) or plan.engine.gpu_label
    flags = dict(base.launch)
    # Both change what the client sees (tokens a message, the step's timing): on every trial.
    return dataclasses.replace(
        told, kv_cache_tokens=logparse.kv_cache_tokens(log), phases=phases,
        start_phases=startlog.with_process_start(startlog.start_phases(log),
                                                 phases.get("start")),
        vllm_version=told.vllm_version or logparse.vllm_version(log), gpu_name=gpu_name,
        interrupted=bool(held.pending),
        async_scheduling=logparse.async_scheduling(log, flags),
        stream_interval=logparse.stream_interval(log, flags))


def benchmark(plan: TrialPlan, server: Engine, base: TrialRecord, phases: dict,
              phase: Phase, rig: Rig = Rig()) -> TrialRecord:
    """The trial's benchmark on a healthy server, run again (at most ``INVALID_RETRIES``
    times, after a pause on ``rig.clock``) when the client rather than the server was
    measured; then, in a ladder study, the ladder (phase ``ladder``)."""
    clock = rig.clock
    base = dataclasses.replace(base, vllm_version=_server_version(server.url))
    phase("benchmark")
    start = clock.monotonic()
    rejected: list[str] = []
    try:
        for attempt in range(1 + INVALID_RETRIES):
            result = run_interruptible(_watched_benchmark(server, plan, attempt, rig.bench))
            invalid = result.invalid_for(plan.benchmark.told)
            if invalid is None or not result.metrics.get("completed"):
                break
            if not (result.lag_reason or result.metrics.get("coalesced_reads")):
                break  # the server's own batching: another run would see the same
            # The client, not the server, was measured: the server is still up, so run the
            # benchmark again rather than spend a trial.
            rejected.append(invalid)
            if attempt < INVALID_RETRIES:  # no pause when no run follows
                phase(f"benchmark again ({invalid.split(' (')[0]})")  # why, less the remedy
                clock.sleep(INVALID_PAUSE_S)
    except ServerDied as e:
        phases["benchmark"] = clock.monotonic() - start
        return record.failed(_failure(e.kind, str(e), server), base)
    except TraceError as e:
        phases["benchmark"] = clock.monotonic() - start
        return record.failed(Failure(kind=FailureKind.TRACE, message=str(e)), base)
    phases["benchmark"] = clock.monotonic() - start
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
    if plan.benchmark.ladder is not None:
        start = clock.monotonic()
        try:
            curve = run_interruptible(_ladder(server, plan, result, phase, rig.bench)).curve
        except ServerDied as e:
            return record.failed(_failure(e.kind, str(e), server), ran)
        except TraceError as e:
            return record.failed(Failure(kind=FailureKind.TRACE, message=str(e)), ran)
        finally:
            phases["ladder"] = clock.monotonic() - start
        metrics = {**metrics, **objective_figures(curve, plan.benchmark.ladder.start_rate)}
        base = dataclasses.replace(base, curve=curve)
        ran = dataclasses.replace(base, metrics=metrics)
    missing = [m for m in plan.scoring.metrics if m not in metrics]
    if missing:
        why = (": the steady window was too short for an interval (more requests, or "
               "measurement.early_stop)" if any(m.startswith("steady_") for m in missing)
               else "")
        return record.failed(Failure(kind=FailureKind.BENCHMARK_FAILED,
                                     message=f"no value for {', '.join(missing)}{why}"), ran)
    return record.measured(plan.scoring, metrics, base)


def confirm_step(plan: TrialPlan, confirm: Confirm, bench: Bench = run_benchmark) -> Step:
    """Benchmark (with ``bench``) as many more times on the same server as ``confirm``
    says for the first run's metrics; tell the medians, keep every run."""
    return Step("confirm", lambda server, told, phase: _confirm(
        plan, server, told, confirm(told.metrics), phase, bench))


def _confirm(plan: TrialPlan, server: Engine, told: TrialRecord, n: int,
             phase: Phase, bench: Bench) -> TrialRecord:
    if n <= 0:
        return told
    names = list(plan.scoring.metrics)
    first = dict(told.metrics)
    runs = [confirmation.repetition(first, names, told.window)]
    rejected = list(told.rejected_runs)
    for k in range(n):
        phase(f"confirm {k + 1}/{n}")
        try:
            result = run_interruptible(_watched_benchmark(server, plan,
                                                          1 + INVALID_RETRIES + k, bench))
        except (ServerDied, TraceError) as e:
            rejected.append(f"confirmation run: {e}")
            break
        invalid = result.invalid_for(plan.benchmark.told)
        if invalid is not None or any(m not in result.metrics for m in names):
            rejected.append(f"confirmation run: {invalid or 'missing objective'}")
            continue
        runs.append(confirmation.repetition(result.metrics, names, result.window))
    values = [r["metrics"] for r in runs]
    base = dataclasses.replace(told, repeats=tuple(runs), rejected_runs=tuple(rejected),
                               spread=confirmation.spread(values, names))
    return record.measured(plan.scoring, confirmation.medians(first, values, names), base)

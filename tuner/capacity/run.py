"""Measure a server's capacity under SLOs: one warm-up at full load, then a load ladder.

``run_ladder`` drives one live server. The warm-up is today's saturated closed loop
(``run_benchmark`` with the caller's ``LoadSpec``); its request throughput seeds the ladder
(``tuner.loadgen.ladder``), which then picks open-loop request rates one by one. Each level
is a bounded run of ``level_s`` seconds of arrivals (gamma gaps of the load's
``burstiness``: Poisson by default, as ``vllm bench serve --request-rate``; on a trace,
the trace's own arrivals at the speed-up that offers the rate: ``level_load``) with no
concurrency limit; the requests sent within it finish and count. The result is the
latency-vs-load curve (``tuner.trials.curve``), in requests/s for a trace too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from tuner.errors import BenchmarkError, UsageError
from tuner.loadgen.benchmark import Bench, BenchmarkResult, run_benchmark
from tuner.loadgen.ladder import LadderPlan, assess, level_requests, next_rate
from tuner.loadgen.replay import Trace, speedup_for
from tuner.loadgen.spec import SLO, LoadSpec, WorkloadSpec
from tuner.loadgen.trace import read_trace
from tuner.slo import Slo
from tuner.trials.curve import Curve, Level

# Level k draws prompts with seed + k x this: the prompts of an earlier level (or of the
# warm-up) again would be served from the prefix cache and flatter the later level. A
# prime, apart from the runner's RUN_SEED_STEP (tuner/runner/measure.py), so that a level
# never repeats a confirmation run's prompts either.
LEVEL_SEED_STEP = 104_729

# A level whose client could not keep up (its event loop lagged, or it read several
# messages at once) measured the client, not the server: it runs again after a pause,
# at most this many times, before it counts as not held (as the trial's benchmark does).
CLIENT_RETRIES = 1
CLIENT_PAUSE_S = 1.0

OnLevel = Callable[[int, int, float], None]


@dataclass(frozen=True)
class LadderRun:
    """The ``curve`` of a ladder and its ``warmup``: the saturated closed-loop run, whose
    metrics are today's single measurement."""

    curve: Curve
    warmup: BenchmarkResult


async def run_ladder(base_url: str, model: str, workload: WorkloadSpec, load: LoadSpec,
                     slo: SLO, plan: LadderPlan = LadderPlan(), *, level_s: float = 60.0,
                     on_level: OnLevel | None = None, time_scale: float = 1.0,
                     warmup: BenchmarkResult | None = None,
                     bench: Bench = run_benchmark) -> LadderRun:
    """Warm up, then measure levels until the ladder is done; the curve of the levels.
    The one entry point of a ladder: the trial's (``tuner.runner.measure``), the
    benchmarks' and the tests'.

    The warm-up runs first on purpose: the first run on a fresh server reads a higher p99
    ITL than later ones (docs/loadgen.md, "The first run on a fresh server"), and a ladder
    level must not pay for it; the warm-up at full load absorbs it and gives the saturated
    throughput. Given ``warmup`` (a trial's own saturated benchmark on the same server),
    that run is the warm-up and none is run here; else ``load`` must be a closed loop
    (``max_concurrency``, no request rate). ``load``'s ``burstiness``, endpoint and client
    settings apply to the levels too. ``slo`` must set an objective: a level holds when
    every one is met by the run (p99 TTFT, p99 ITL...), no request failed and the run
    measured the server, not the client. ``on_level(k, n, rate)`` is called before level
    k (1-based) of at most n, at ``rate`` requests/s. Each run is ``bench``'s (the load
    generator's ``run_benchmark``, or an in-process stand-in). Rates, durations and
    figures are the server's time (simulated time on a simulator running ``time_scale``
    times faster than real time). BenchmarkError when the warm-up completes no request.
    """
    if slo.empty or (warmup is None and not load.closed_loop):
        raise UsageError("a ladder needs a closed-loop load for its warm-up "
                         "(max_concurrency, no request_rate) and at least one SLO")
    warm = warmup or await bench(base_url, model, workload, load, slo=slo,
                                 time_scale=time_scale)
    if not warm.metrics.get("completed"):
        raise BenchmarkError(f"the ladder's warm-up completed no request: {warm.invalid_reason}")
    curve = await _climb(bench, base_url, model, workload, load, slo, plan,
                         saturated=warm.metrics.get("request_throughput", 0.0),
                         level_s=level_s, on_level=on_level, time_scale=time_scale)
    return LadderRun(curve, warm)


async def _climb(bench: Bench, base_url: str, model: str, workload: WorkloadSpec,
                 load: LoadSpec, slo: SLO, plan: LadderPlan, *, saturated: float,
                 level_s: float, on_level: OnLevel | None, time_scale: float) -> Curve:
    judged = slo.judged(plan.tolerance)
    levels: list[Level] = []
    while (rate := next_rate([lv.point(judged) for lv in levels if lv.usable],
                             saturated, plan, spent=len(levels))) is not None:
        if on_level is not None:
            on_level(len(levels) + 1, plan.max_levels, rate)
        seeded = workload.model_copy(
            update={"seed": workload.seed + (len(levels) + 1) * LEVEL_SEED_STEP})
        for attempt in range(1 + CLIENT_RETRIES):
            if attempt:  # the client, not the server, was measured: measure the level again
                await asyncio.sleep(CLIENT_PAUSE_S)
            result = await bench(base_url, model, seeded,
                                 level_load(load, rate, level_s, time_scale,
                                            workload=workload),
                                 slo=slo, time_scale=time_scale,
                                 stop_on_miss=stops_on_miss(plan, rate))
            if result.valid or not (result.lag_reason
                                    or result.metrics.get("coalesced_reads")):
                break
        levels.append(level_of(rate, result, judged))
    verdict = assess([lv.point(judged) for lv in levels if lv.usable], saturated, plan,
                     spent=len(levels)).verdict
    return Curve(levels=tuple(levels), saturated_rps=saturated, tolerance=plan.tolerance,
                 verdict=verdict.value, slo=dict(judged.limits))


def stops_on_miss(plan: LadderPlan, rate: float) -> bool:
    """Whether the level at ``rate`` stops sending once its SLO miss is certain
    (``plan.stop_on_miss``): every level but one at the plan's ``start_rate``, the user's
    reference rate, whose figures a study reads as they are (``reference_*``)."""
    return plan.stop_on_miss and rate != plan.start_rate


def level_load(load: LoadSpec, rate: float, level_s: float, time_scale: float = 1.0, *,
               workload: WorkloadSpec | None = None) -> LoadSpec:
    """``load`` as one open-loop level: ``round(rate x level_s)`` requests (at least one)
    at ``rate`` requests/s (server time), no concurrency limit, no warm-up, no early stop.
    A fixed count, as ``vllm bench serve --request-rate R --num-prompts N``, whose schedule
    (``tuner.loadgen.arrivals.arrival_times``) is rescaled so that the last arrival falls
    at ``N / R``: the level offers exactly its rate. Arrivals over a fixed duration instead
    offer a Poisson count, a few percent off the rate on a short level (one standard
    deviation is ``1 / sqrt(rate x level_s)``), more than the ladder's tolerance.

    On a trace ``workload`` the level is a speed-up of the trace (``trace_pace``); the
    ladder and the curve still speak requests/s. Validated: a UsageError when the level
    would schedule too many requests or a speed-up past the limit, or for a trace load
    (one with a ``speedup``) given no trace workload."""
    if workload is not None and workload.kind == "trace":
        pace = trace_pace(read_trace(workload.trace or ""), rate, level_s, time_scale)
    elif load.speedup is not None:
        raise UsageError("a ladder level on a trace replay needs the trace workload")
    else:
        pace = {"request_rate": rate * time_scale,
                "num_requests": level_requests(rate, level_s)}
    return LoadSpec(**{**load.model_dump(), **pace, "duration_s": None,
                       "max_concurrency": None, "warmup_requests": 0, "early_stop": False})


def trace_pace(trace: Trace, rate: float, level_s: float, time_scale: float = 1.0
               ) -> dict[str, float | int]:
    """A level at ``rate`` requests/s (server time) on ``trace``, as ``LoadSpec`` fields:
    the trace replayed at the speed-up that offers ``rate`` on average over the whole
    trace (``tuner.loadgen.replay.speedup_for``; wall time on a simulator), no request
    rate of its own. Its requests are the trace's first ``round(rate x level_s)``, and at
    most the whole trace once: a trace shorter than that is replayed once, and the level
    lasts less than ``level_s`` (its span over the speed-up). A second pass would send
    the first pass's prefix blocks again, which the server's cache still holds, and
    flatter the level. A level of the first requests of a longer trace offers ``rate``
    only as far as those requests arrive as the whole trace does."""
    return {"request_rate": math.inf, "speedup": speedup_for(trace, rate * time_scale),
            "num_requests": min(level_requests(rate, level_s), len(trace))}


def level_of(rate: float, result: BenchmarkResult, slo: Slo) -> Level:
    """The level a run at offered ``rate`` measured (its metrics already in server time):
    the output throughput over the steady window where it gave an interval, else over the
    run; latencies over the whole run, as ``vllm bench serve`` reports them, and over its
    steady state (``steady_p99_*``, ``tuner.loadgen.window.steady_samples``) with their
    intervals (``estimates``). It holds when ``slo``'s verdict on it holds
    (``tuner.slo.Slo.verdict``: every limit met by the steady requests where the run had a
    steady state, else by the whole run, and the backlog within the tolerance), the run
    was valid, completed requests and failed none. SLO attainment counts failed requests
    as missing the SLOs. A run stopped on a certain miss (``stop_reason`` "missed") never
    holds, and its figures, those of a shortened run, are marked ``stopped_early``."""
    m = result.metrics
    completed, failed = int(m.get("completed", 0)), int(m.get("failed", 0))
    good = round(m.get("request_goodput", 0.0) * m.get("duration", 0.0))
    window = result.window or {}
    stopped = result.stop_reason == "missed"
    level = Level(offered_rps=rate, achieved_rps=achieved_rps(result),
                  output_throughput=_finite(m.get("steady_output_throughput",
                                                  m.get("output_throughput"))),
                  p50_ttft_ms=_finite(m.get("median_ttft_ms")),
                  p99_ttft_ms=_finite(m.get("p99_ttft_ms")),
                  p50_itl_ms=_finite(m.get("median_itl_ms")),
                  p99_itl_ms=_finite(m.get("p99_itl_ms")),
                  p99_tpot_ms=_finite(m.get("p99_tpot_ms")),
                  p99_e2el_ms=_finite(m.get("p99_e2el_ms")),
                  steady_p99_ttft_ms=_finite(m.get("window_p99_ttft_ms")),
                  steady_p99_itl_ms=_finite(m.get("window_p99_itl_ms")),
                  steady_p99_tpot_ms=_finite(m.get("window_p99_tpot_ms")),
                  steady_p99_e2el_ms=_finite(m.get("window_p99_e2el_ms")),
                  estimates=window.get("estimates") or {},
                  slo_attainment=good / (completed + failed) if completed + failed else 0.0,
                  goodput_rps=_finite(m.get("request_goodput")),
                  latency_trend=_finite(window.get("latency_trend")),
                  latency_trend_se=_finite(window.get("latency_trend_se")),
                  requests=completed + failed, failed=failed,
                  invalid_reason=result.invalid_reason, stopped_early=stopped or None)
    verdict = level.verdict(slo)
    held = (not stopped and result.valid and completed > 0 and failed == 0
            and verdict.held)
    return dataclasses.replace(level, held=held, margins=verdict.to_json())


def achieved_rps(result: BenchmarkResult) -> float | None:
    """Requests completed per second (server time) within the run's steady window, from
    the first completion to the last arrival: the rate the server kept up with. The whole
    run's rate (vLLM's ``request_throughput``) counts the drain after the last arrival
    too and reads low on a short level. That rate when the run had no window."""
    w = result.window
    if w and w.get("seconds") and w.get("requests") is not None:
        return w["requests"] / (w["seconds"] * result.time_scale)
    return _finite(result.metrics.get("request_throughput"))


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None

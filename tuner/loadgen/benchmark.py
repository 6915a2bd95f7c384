"""One benchmark run against a live server: warm up, measure, and judge the measurement.

``run_benchmark`` orchestrates: warm-up requests (not counted), a ``/metrics`` scrape, the
measured requests (in this process or spread over several), a second scrape, then the pure
metrics, the server's view, the client's own lag and a noise estimate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from tuner.errors import BenchmarkError, UsageError
from tuner.loadgen import gaps, prometheus
from tuner.loadgen.arrivals import arrival_times, arrivals_within, share_of, shard
from tuner.loadgen.client import MAX_PAGE_BYTES, RequestOutput, read_capped
from tuner.loadgen.dispatch import ShardPlan, ShardResult, prepare, run_shard
from tuner.loadgen.lag import judge, lag_stats
from tuner.loadgen.miss import MissLimits
from tuner.loadgen.metrics import (calculate_metrics, count_failures, noise_estimate,
                                   run_meets_slo,
                                   to_simulated_time, to_wall_time)
from tuner.loadgen.multiproc import run_in_processes
from tuner.loadgen.priority import REALTIME
from tuner.loadgen.replay import arrivals_at, arrivals_within_at
from tuner.loadgen.spec import SLO, LoadSpec, WorkloadSpec
from tuner.loadgen.trace import read_trace
from tuner.loadgen.window import Window, steady_estimates, steady_figures, steady_window

Progress = Callable[[int, int | None], None]
WARMUP_SEED_OFFSET = 1_000_003
SCRAPE_TIMEOUT_S = 10.0  # a /metrics page not read by then is left out (or the request timeout)


@dataclass(frozen=True, kw_only=True)
class BenchmarkResult:
    """The outcome of one run. ``metrics`` uses vLLM's result-JSON keys; ``valid`` is False
    (with ``invalid_reason``) when the numbers describe the client rather than the server
    (``lag_reason``), or when the run saw too few inter-token gaps to tell vLLM's ITL.
    ``unobservable`` maps each metric family whose gaps were not seen (``gaps.ITL``,
    ``gaps.PER_TOKEN``) to why; ``invalid_for`` judges the metrics a study tells. Built with
    keywords; the maps are the load generator's JSON (the runner reads them as the trial
    record's typed parts, ``tuner.trials.parts``)."""

    metrics: dict[str, float]
    failures: dict[str, int]
    server: dict[str, float]
    client: dict[str, float]
    valid: bool
    invalid_reason: str | None
    noise: dict[str, float]
    config: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    time_scale: float = 1.0
    lag_reason: str | None = None
    unobservable: dict[str, str] = field(default_factory=dict)
    # The steady window (closed loop or paced; see ``window``) in simulated time, or None; and why
    # the run stopped sending: count, duration, early (intervals within targets), cap, or
    # missed (a paced run's SLO miss was certain: ``run_benchmark``'s ``stop_on_miss``).
    window: dict[str, Any] | None = None
    stop_reason: str = "count"

    def invalid_for(self, metrics: Iterable[str]) -> str | None:
        """Why this run cannot tell ``metrics`` (a lagging client, unseen gaps), or None."""
        return self.lag_reason or gaps.first_unobservable(metrics, self.unobservable)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: non-finite floats become None."""
        return _json_safe(dataclasses.asdict(self))


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


class Bench(Protocol):
    """Runs one benchmark (a trial's run, a confirmation run or a ladder level) on the
    engine serving at ``base_url``, as ``run_benchmark`` (which is one) says."""

    async def __call__(self, base_url: str, model: str, workload: WorkloadSpec,
                       load: LoadSpec, slo: SLO | None = None, *, time_scale: float = 1.0,
                       stop_on_miss: bool = False) -> BenchmarkResult: ...


async def fetch_model(base_url: str, timeout_s: float = 30.0) -> str:
    """The first model the server lists at ``/v1/models``; BenchmarkError if the server does
    not answer within ``timeout_s`` or its page (at most ``MAX_PAGE_BYTES``) names none."""
    url = f"{base_url.rstrip('/')}/v1/models"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as s:
            async with s.get(url) as resp:
                resp.raise_for_status()
                page, whole = await read_capped(resp, MAX_PAGE_BYTES)
        if not whole:
            raise ValueError(f"the page is larger than {MAX_PAGE_BYTES} bytes")
        return str(json.loads(page)["data"][0]["id"])
    except TimeoutError:
        raise BenchmarkError(f"cannot read the model name from {url}: no answer within "
                             f"{timeout_s:g} s; is the server up? (or pass the model name)"
                             ) from None
    except (aiohttp.ClientError, KeyError, IndexError, TypeError, ValueError) as e:
        raise BenchmarkError(f"cannot read the model name from {url}: "
                             f"{str(e) or type(e).__name__}; is the server up? "
                             "(or pass the model name)") from e


async def run_benchmark(base_url: str, model: str, workload: WorkloadSpec, load: LoadSpec,
                        slo: SLO | None = None, progress: Progress | None = None,
                        time_scale: float = 1.0, stop_on_miss: bool = False
                        ) -> BenchmarkResult:
    """Benchmark the server at ``base_url`` serving ``model``.

    Failed requests are data (``result.failures``), never exceptions; BenchmarkError only when
    a client process dies, ``TraceError`` when a trace workload's file cannot be replayed
    (gone, changed since ``workload.trace_sha256``, no trace). The schedule and the
    requests are built off the event loop (a trace is read from disk, a run's bodies take
    a while), so that the caller's watch on the server goes on meanwhile.
    ``progress(done, total)`` is called as measured requests finish
    (``total`` None for a duration). With ``time_scale`` k != 1 (a simulator running k times
    faster than real time) time-based metrics are converted back to simulated time. With
    ``stop_on_miss``, a paced run of a request count in one client process stops sending
    once it certainly misses ``slo``'s p99 TTFT or ITL, or a request failed
    (``tuner.loadgen.miss``; its ``stop_reason`` is then "missed"); it is ignored for
    other runs.
    """
    base_url = base_url.rstrip("/")
    miss = _miss_limits(load, slo, time_scale) if stop_on_miss else None
    # A bad schedule fails first.
    plans = await asyncio.to_thread(_plans, base_url, model, workload, load, miss)
    warm = await _warm_up(base_url, model, workload, load)
    total = None if load.duration_s is not None else load.num_requests
    scrape_s = min(SCRAPE_TIMEOUT_S, load.request_timeout_s)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=scrape_s)) as session:
        before = await prometheus.scrape(session, base_url)
        poller = prometheus.GaugePoller(session, base_url, load.metrics_poll_s)
        poller.observe(before)
        poller.start()
        try:
            t0, shards = await _run(plans, progress, total)
        finally:
            await poller.stop()
        after = await prometheus.scrape(session, base_url)
        poller.observe(after)
    return _result(shards, t0, workload, load, slo, time_scale, warm,
                   prometheus.server_view(before, after, poller.peaks))


async def _warm_up(base_url: str, model: str, workload: WorkloadSpec,
                   load: LoadSpec) -> list[RequestOutput]:
    if load.warmup_requests <= 0:
        return []
    warm_spec = workload.model_copy(update={"seed": workload.seed + WARMUP_SEED_OFFSET})
    plan = ShardPlan(base_url, model, warm_spec, load.endpoint, load.ignore_eos,
                     num_requests=load.warmup_requests, timeout_s=load.request_timeout_s,
                     http_client=load.http_client, text_prompts=load.text_prompts,
                     concurrency=min(load.max_concurrency or load.warmup_requests,
                                     load.warmup_requests))
    return (await run_shard(plan, source=await asyncio.to_thread(prepare, plan))).outputs


def _miss_limits(load: LoadSpec, slo: SLO | None, time_scale: float) -> MissLimits | None:
    """The limits a paced run of a request count, in one client process, stops on (wall
    seconds; its gap bound filled in by the client, which holds the requests); None for
    any other run or without a p99 TTFT or ITL objective."""
    wall = to_wall_time(slo, time_scale)
    paced = _scheduled(load)
    if (wall is None or (wall.ttft_p99_ms is None and wall.itl_p99_ms is None) or not paced
            or load.duration_s is not None or load.client_processes != 1):
        return None
    return MissLimits(*(None if v is None else v / 1000.0
                        for v in (wall.ttft_p99_ms, wall.itl_p99_ms)),
                      requests=load.num_requests)


def _scheduled(load: LoadSpec) -> bool:
    """Whether requests arrive on a schedule: at a finite rate, or a trace's times."""
    return math.isfinite(load.request_rate) or load.speedup is not None


def _plans(base_url: str, model: str, workload: WorkloadSpec, load: LoadSpec,
           miss: MissLimits | None = None) -> list[ShardPlan]:
    n = load.client_processes
    if load.max_concurrency is not None:
        n = min(n, load.max_concurrency)
    arrivals = schedule(workload, load)
    return [
        ShardPlan(base_url, model, workload, load.endpoint, load.ignore_eos, k, n,
                  num_requests=load.request_cap, duration_s=load.duration_s,
                  arrivals=tuple(shard(arrivals, k, n)) if arrivals is not None else None,
                  concurrency=share_of(load.max_concurrency, k, n),
                  timeout_s=load.request_timeout_s, http_client=load.http_client,
                  text_prompts=load.text_prompts, think_s=load.think_time_ms / 1000.0,
                  priority=load.client_priority,
                  early_stop=((load.throughput_ci, load.itl_ci, load.itl_metric)
                              if load.early_stop else None),
                  miss=miss if arrivals is not None and n == 1 else None)
        for k in range(n)
    ]


def schedule(workload: WorkloadSpec, load: LoadSpec) -> list[float] | None:
    """The run's arrival offsets (before the first request), or None when not paced: a
    trace's at ``load.speedup``, else drawn at ``load.request_rate``. UsageError when a
    trace workload comes without a speed-up or a speed-up without a trace."""
    if (workload.kind == "trace") != (load.speedup is not None):
        raise UsageError("a trace workload needs a speedup, and a speedup a trace workload")
    if load.speedup is not None:
        trace = read_trace(workload.trace or "", workload.trace_sha256)
        return (arrivals_within_at(trace, load.speedup, load.duration_s)
                if load.duration_s is not None else
                arrivals_at(trace, load.speedup, load.num_requests))
    if math.isinf(load.request_rate):
        return None
    return (arrivals_within(load.duration_s, load.request_rate, load.burstiness,
                            workload.seed) if load.duration_s is not None else
            arrival_times(load.num_requests, load.request_rate, load.burstiness,
                          workload.seed))


async def _run(plans: list[ShardPlan], progress: Progress | None,
               total: int | None) -> tuple[float, list[ShardResult]]:
    if len(plans) > 1:
        report = (lambda done: progress(done, total)) if progress else None
        return await run_in_processes(plans, report)
    done = [0]

    def on_done(_out: RequestOutput) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    source = await asyncio.to_thread(prepare, plans[0])
    shard_result = await run_shard(plans[0], None, on_done, source=source)
    return shard_result.start_time, [shard_result]


def _result(shards: list[ShardResult], t0: float, workload: WorkloadSpec, load: LoadSpec,
            slo: SLO | None, time_scale: float, warm: list[RequestOutput],
            server: dict[str, float]) -> BenchmarkResult:
    outputs = sorted((o for s in shards for o in s.outputs), key=lambda o: o.index)
    end = max((s.end_time for s in shards), default=t0)
    dur_s = max(end - t0, 1e-9)
    # Goodput and slo_met judge wall-clock latencies: against the SLO in wall time.
    metrics = calculate_metrics(outputs, dur_s, to_wall_time(slo, time_scale))
    client = _client_view(shards, t0, warm)
    lag = judge(client, load.max_client_lag_ms)
    unseen = gaps.unobservable(metrics, load.min_gap_share, client.get("loop_lag_max_ms"))
    reason = lag or unseen.get(gaps.ITL)
    if metrics["completed"] == 0:
        reason = "no request succeeded: " + ", ".join(sorted(count_failures(outputs)))
    config = {"workload": workload.model_dump(), "load": load.model_dump(),
              "slo": dataclasses.asdict(slo) if slo else None}
    errors = [o.error for o in outputs if not o.success][:10]
    paced = _scheduled(load)  # open loop: [first completion, last arrival]
    window = steady_window(outputs, load.itl_metric) if load.closed_loop or paced else None
    stop = shards[0].stop_reason if len(shards) == 1 else "count"
    metrics.update(steady_metrics(window, load.itl_metric))
    stored = window_in_simulated_time(window, time_scale)
    if paced and window is not None:
        metrics.update(window_slo_metrics(steady_figures(outputs, window.start, window.end),
                                          to_wall_time(slo, time_scale)))
        stored["estimates"] = estimates_in_simulated_time(
            steady_estimates(outputs, window.start, window.end), time_scale)
    return BenchmarkResult(
        metrics=to_simulated_time(metrics, time_scale), failures=count_failures(outputs),
        server=server, client=client, valid=reason is None, invalid_reason=reason,
        noise=noise_estimate(outputs), config=config, errors=errors, time_scale=time_scale,
        lag_reason=lag, unobservable=unseen,
        window=stored, stop_reason=stop)


def steady_metrics(window: Window | None, itl_metric: str) -> dict[str, float]:
    """``steady_output_throughput`` and ``steady_p99_<itl_metric>_ms``: the figures over the
    steady window, present only when it gave an interval (the study can tell them)."""
    out: dict[str, float] = {}
    if window is not None and window.output_throughput is not None:
        out["steady_output_throughput"] = window.output_throughput.value
    if window is not None and window.p99_itl_ms is not None:
        out[f"steady_p99_{itl_metric}_ms"] = window.p99_itl_ms.value
    return out


def window_slo_metrics(figures: dict[str, float], slo: SLO | None) -> dict[str, float]:
    """An open-loop run's ``window.steady_figures`` as ``window_p99_ttft_ms``..., and, given
    an SLO whose every figure the window has, whether they met it (``window_slo_met``,
    judged as ``slo_met``)."""
    out = {f"window_{k}": v for k, v in figures.items()}
    if slo is not None and not slo.empty and all(
            lim is None or key in figures for lim, key in (
                (slo.ttft_p99_ms, "p99_ttft_ms"), (slo.itl_p99_ms, "p99_itl_ms"),
                (slo.tpot_ms, "p99_tpot_ms"), (slo.e2el_ms, "p99_e2el_ms"))):
        out["window_slo_met"] = float(run_meets_slo(figures, slo))
    return out


def window_in_simulated_time(window: Window | None, time_scale: float) -> dict | None:
    """The window as a dict, its figures in simulated time (bounds stay on the run clock)."""
    if window is None:
        return None
    out = window.to_dict()
    for key, factor in (("output_throughput", 1.0 / time_scale), ("p99_itl_ms", time_scale)):
        if out[key] is not None:
            out[key] = {**out[key], **{k: out[key][k] * factor for k in
                                       ("value", "half_width", "repeat_half_width")}}
    return out


def estimates_in_simulated_time(estimates: dict[str, dict], time_scale: float
                                ) -> dict[str, dict]:
    """``window.steady_estimates`` (wall ms) in simulated ms: value and ends times
    ``time_scale``."""
    return {figure: {k: (v * time_scale if k in ("value", "lower", "upper") and v is not None
                         else v) for k, v in est.items()}
            for figure, est in estimates.items()}


def _client_view(shards: list[ShardResult], t0: float,
                 warm: list[RequestOutput]) -> dict[str, float]:
    client: dict[str, float] = {"processes": len(shards), "warmup_requests": len(warm),
                                "warmup_failed": sum(1 for o in warm if not o.success)}
    client.update(lag_stats("send_lag", [x for s in shards for x in s.send_lags]))
    client.update(lag_stats("loop_lag", [x for s in shards for x in s.loop_lags]))
    client["cpu_util_max"] = max((s.cpu_s / max(s.end_time - t0, 1e-9) for s in shards),
                                 default=0.0)
    client["chunks"] = sum(o.chunks for s in shards for o in s.outputs)
    client["realtime_processes"] = sum(1 for s in shards if s.granted.priority == REALTIME)
    client["realtime_refused"] = sum(1 for s in shards if s.granted.refused)
    return client

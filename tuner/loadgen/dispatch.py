"""Send one share of a run's requests from one event loop: pacing, concurrency, duration.

``run_shard`` is what a client process runs, whether the run has one process or several
(``multiproc``). Request bodies and arrival times are all computed before the first await.
Three modes: paced arrivals (tasks created at their arrival times, behind a semaphore if a
concurrency limit is set), closed loop (``max_concurrency`` workers, each sending its next
request as soon as its previous one ends, or ``think_s`` later), and everything at once (no
rate, no limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import aiohttp

from tuner.loadgen.cancel import cancel_and_wait
from tuner.loadgen.client import RequestOutput, send
from tuner.loadgen.endpoints import PARSERS, PATHS, build_body
from tuner.loadgen.http1 import Client, send_fast
from tuner.loadgen.lag import LoopLagProbe
from tuner.loadgen.miss import MissLimits, MissWatch
from tuner.loadgen.priority import NORMAL, REALTIME, Granted, realtime
from tuner.loadgen.spec import WorkloadSpec
from tuner.loadgen.window import steady_window
from tuner.loadgen.workloads import iter_requests


@dataclass(frozen=True)
class ShardPlan:
    """Share ``k`` of ``n``: requests ``k, k+n, ...`` of the workload."""

    base_url: str
    model: str
    workload: WorkloadSpec
    endpoint: str = "completions"
    ignore_eos: bool = True
    k: int = 0
    n: int = 1
    num_requests: int | None = 1000
    duration_s: float | None = None
    arrivals: tuple[float, ...] | None = None  # this share's offsets; None: not paced
    concurrency: int | None = None
    timeout_s: float = 6 * 3600.0
    http_client: str = "fast"
    text_prompts: bool = False
    # Closed loop: stop sending once the steady window's intervals are within these relative
    # half-widths (throughput, p99 ITL of ``itl_metric``); ``num_requests`` is then the cap.
    early_stop: tuple[float, float, str] | None = None
    think_s: float = 0.0  # closed loop: a client's pause between a response and its next send
    # Paced: stop sending once the run's SLO miss is certain (``tuner.loadgen.miss``).
    miss: MissLimits | None = None
    priority: str = NORMAL  # the client thread's CPU priority (``tuner.loadgen.priority``)


@dataclass
class ShardResult:
    outputs: list[RequestOutput] = field(default_factory=list)
    send_lags: list[float] = field(default_factory=list)
    loop_lags: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    start_time: float = 0.0
    end_time: float = 0.0
    stop_reason: str = "count"  # count | duration | early | cap | missed
    granted: Granted = field(default_factory=Granted)  # the CPU priority the thread ran at


class _Source:
    """Indexed request bodies of one share: precomputed for a count, lazy for a duration.
    ``max_gaps``: for a count, the most inter-token gaps its requests can stream (the sum
    of their ``max_tokens - 1``); None for a duration."""

    def __init__(self, plan: ShardPlan) -> None:
        stop = plan.num_requests if plan.duration_s is None else None
        requests = itertools.islice(iter_requests(plan.workload), plan.k, stop, plan.n)
        if stop is not None:
            requests = list(requests)
        self.max_gaps = (sum(max(0, r.output_len - 1) for r in requests)
                         if stop is not None else None)
        pairs = ((plan.k + j * plan.n, r) for j, r in enumerate(requests))
        bodies = ((i, r.prompt_len, build_body(r, plan.endpoint, plan.model, plan.ignore_eos,
                                                  plan.text_prompts))
                  for i, r in pairs)
        self.items: Iterator = iter(list(bodies)) if stop is not None else bodies


def session_for(concurrency: int | None, timeout_s: float) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=concurrency or 0, keepalive_timeout=60)
    return aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                 timeout=aiohttp.ClientTimeout(total=timeout_s))


def prepare(plan: ShardPlan) -> _Source:
    """Build the share's request bodies before the run starts, then set the garbage
    collector aside for the run: every object alive is frozen, so no collection in the
    middle scans the process's whole heap and stalls the loop. Only the young generations
    are collected first: a full collection would scan that heap before every run, and the
    older garbage it would free waits for the first full collection after the run, which
    unfreezes it."""
    source = _Source(plan)
    gc.collect(1)
    gc.freeze()
    return source


async def run_shard(plan: ShardPlan, t0: float | None = None,
                    on_done: Callable[[RequestOutput], None] | None = None,
                    clock: Callable[[], float] = time.perf_counter,
                    source: _Source | None = None) -> ShardResult:
    """Run the share; ``t0`` is the run's start on ``clock`` (shared by every process; by
    default the moment the share is ready to send). The thread runs it at the plan's CPU
    priority where the OS allows (``tuner.loadgen.priority``)."""
    source = source or prepare(plan)  # before the first await
    with realtime(plan.priority == REALTIME) as granted:
        result = await _run_shard(plan, t0, on_done, clock, source)
    result.granted = granted
    return result


async def _run_shard(plan: ShardPlan, t0: float | None,
                     on_done: Callable[[RequestOutput], None] | None,
                     clock: Callable[[], float], source: _Source) -> ShardResult:
    result = ShardResult()
    url = plan.base_url + PATHS[plan.endpoint]
    parser_cls = PARSERS[plan.endpoint]
    probe = LoopLagProbe()
    cpu0 = time.process_time()
    path = PATHS[plan.endpoint]
    http = Client(plan.base_url, plan.timeout_s) if plan.http_client == "fast" else None
    async with contextlib.AsyncExitStack() as stack:
        session = None if http is not None else await stack.enter_async_context(
            session_for(plan.concurrency, plan.timeout_s))
        probe.start()
        t0 = result.start_time = clock() if t0 is None else t0
        if (delay := t0 - clock()) > 0:
            await asyncio.sleep(delay)
        deadline = t0 + plan.duration_s if plan.duration_s is not None else None

        sent: list[RequestOutput] = []

        async def one(item, due: float | None) -> None:
            index, prompt_len, body = item
            now = clock()
            due = now if due is None else due
            out = RequestOutput(index=index, prompt_len=prompt_len, scheduled_time=due)
            sent.append(out)
            result.send_lags.append(max(0.0, now - due))
            if http is not None:
                await send_fast(http, path, body, parser_cls(), out, clock)
            else:
                await send(session, url, body, parser_cls(), out, clock)
            result.outputs.append(out)
            if on_done is not None:
                on_done(out)

        if plan.arrivals is not None:
            stop = asyncio.Event()
            watch = (asyncio.create_task(_watch_miss(plan, source, sent, result, stop, clock))
                     if plan.miss else None)
            await _paced(plan, source, t0, one, clock, stop)
            await cancel_and_wait(watch)
            result.stop_reason = "missed" if stop.is_set() else "count"
        elif plan.concurrency:
            stop = asyncio.Event()
            watch = (asyncio.create_task(_watch(plan.early_stop, result, stop))
                     if plan.early_stop else None)
            await _closed_loop(plan.concurrency, source, deadline, one, clock, stop,
                               plan.think_s)
            if watch is not None:
                watch.cancel()
            result.stop_reason = ("early" if stop.is_set() else "cap" if plan.early_stop
                                  else "duration" if deadline is not None else "count")
        else:
            await asyncio.gather(*(one(item, None) for item in source.items))
        result.end_time = clock()  # the last response has ended: the run's duration stops
        result.cpu_s = time.process_time() - cpu0
        await probe.stop()
        if http is not None:
            await http.close()
    result.loop_lags = probe.samples
    gc.unfreeze()  # (left frozen if the run raised: harmless, only slower collections)
    return result


async def _paced(plan: ShardPlan, source: _Source, t0: float, one, clock,
                 stop: asyncio.Event) -> None:
    """Send each request at its arrival time until the schedule ends or ``stop`` is set
    (checked at each arrival); the requests sent finish."""
    sem = asyncio.Semaphore(plan.concurrency) if plan.concurrency else None
    tasks = []

    async def limited(item, due: float) -> None:
        if sem is None:
            return await one(item, due)
        if sem.locked():  # a slot frees later than the arrival: the lag starts then
            async with sem:
                return await one(item, clock())
        async with sem:
            return await one(item, due)

    for offset, item in zip(plan.arrivals or (), source.items):
        due = t0 + offset
        if (delay := due - clock()) > 0:
            await asyncio.sleep(delay)
        if stop.is_set():
            break
        tasks.append(asyncio.create_task(limited(item, due)))
    await asyncio.gather(*tasks)


WATCH_S = 2.0  # how often the early stop looks at the window (it costs a pass over the tokens)
MISS_WATCH_SHARE = 0.05  # a paced run's miss watch looks 20 times over its schedule


async def _watch(targets: tuple[float, float, str], result: ShardResult,
                 stop: asyncio.Event) -> None:
    """Set ``stop`` once the steady window so far has both intervals within ``targets``."""
    throughput_rel, itl_rel, itl_metric = targets
    while True:
        await asyncio.sleep(WATCH_S)
        window = steady_window(result.outputs, itl_metric)
        if window is not None and window.within(throughput_rel, itl_rel):
            stop.set()
            return


async def _watch_miss(plan: ShardPlan, source: _Source, sent: list[RequestOutput],
                      result: ShardResult, stop: asyncio.Event, clock) -> None:
    """Set ``stop`` once the paced run's SLO miss is certain (``MissWatch``; the plan's
    limits, with this share's ``max_gaps`` where it has them), looking every
    ``MISS_WATCH_SHARE`` of its schedule (at least every ``WATCH_S``)."""
    limits = plan.miss
    if source.max_gaps is not None:
        limits = dataclasses.replace(limits, gaps=source.max_gaps)
    watch = MissWatch(limits)
    span = plan.arrivals[-1] if plan.arrivals else 0.0
    every = min(WATCH_S, max(span * MISS_WATCH_SHARE, 0.01))
    while True:
        await asyncio.sleep(every)
        if watch.check(sent, result.outputs, clock()) is not None:
            stop.set()
            return


async def _closed_loop(concurrency: int, source: _Source, deadline: float | None,
                       one, clock, stop: asyncio.Event, think_s: float = 0.0) -> None:
    """Each of ``concurrency`` workers sends its next request when its last one ended, or
    ``think_s`` after (the send lag is counted from then)."""
    items = source.items

    async def worker() -> None:
        me = asyncio.current_task()
        due = clock()
        for item in items:
            if (wait := due - clock()) > 0:
                await asyncio.sleep(wait)
            if deadline is not None and clock() >= deadline or stop.is_set():
                return
            if getattr(me, "cancelling", lambda: 0)():  # a cancellation something swallowed
                raise asyncio.CancelledError
            await one(item, due)
            due = clock() + think_s

    await asyncio.gather(*(worker() for _ in range(concurrency)))

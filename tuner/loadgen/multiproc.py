"""Spread a run's client work over several processes when one core cannot keep up.

Each process owns an interleaved share of the requests (request i goes to process i mod N),
its share of the concurrency limit and of the arrival schedule. Processes build their request
bodies, report ready, and all start at one instant ``t0`` on the machine-wide monotonic clock
(``time.perf_counter`` is CLOCK_MONOTONIC on Linux), so their times merge into one run.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tuner.errors import BenchmarkError
from tuner.loadgen.dispatch import ShardPlan, ShardResult, prepare, run_shard

START_MARGIN_S = 0.2


def _child(plan: ShardPlan, conn, counter) -> None:
    try:
        source = prepare(plan)
        conn.send(("ready", None))
        t0 = conn.recv()

        def done(_out) -> None:
            with counter.get_lock():
                counter.value += 1

        result = asyncio.run(run_shard(plan, t0, done, source=source))
        conn.send(("result", result))
    except BaseException:  # reported to the parent, which raises BenchmarkError
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


async def run_in_processes(plans: list[ShardPlan],
                           on_progress: Callable[[int], None] | None = None
                           ) -> tuple[float, list[ShardResult]]:
    """Run each plan in its own process; returns ``(t0, results)``."""
    ctx = mp.get_context("spawn")
    counter = ctx.Value("i", 0)
    pipes, procs = [], []
    for plan in plans:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(plan, child, counter), daemon=True)
        proc.start()
        child.close()
        pipes.append(parent)
        procs.append(proc)
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        try:
            for conn in pipes:
                _expect(await loop.run_in_executor(pool, _recv, conn), "ready")
            t0 = time.perf_counter() + START_MARGIN_S
            for conn in pipes:
                conn.send(t0)
            futures = [loop.run_in_executor(pool, _recv, conn) for conn in pipes]
            pending = set(futures)
            while pending:
                _, pending = await asyncio.wait(pending, timeout=0.2)
                if on_progress is not None:
                    on_progress(counter.value)
            results = [_expect(f.result(), "result") for f in futures]
        finally:
            for proc in procs:
                proc.join(timeout=5)
                if proc.is_alive():
                    proc.terminate()
    return t0, results


def _recv(conn):
    try:
        return conn.recv()
    except EOFError:
        return ("error", "client process exited without a result")


def _expect(message, kind: str):
    tag, payload = message
    if tag == "error":
        raise BenchmarkError(f"a client process failed: {payload.strip().splitlines()[-1]}")
    if tag != kind:
        raise BenchmarkError(f"client process protocol: expected {kind}, got {tag}")
    return payload

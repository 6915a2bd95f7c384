"""How far behind the client itself is: if it lags, latencies it reports are its own.

Two measures: *send lag*, the gap between when a request was due (its arrival time, or the
moment a concurrency slot freed) and when it was sent; *loop lag*, how late a probe task that
sleeps a fixed interval wakes up (every callback the event loop runs late by the same delay,
including the reads that timestamp tokens).
"""

from __future__ import annotations

import asyncio
import time

import numpy as np

from tuner.loadgen.cancel import cancel_and_wait


class LoopLagProbe:
    """Measures event-loop delay with a task that sleeps ``interval_s`` again and again."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self.samples: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        interval, samples, clock = self.interval_s, self.samples, time.perf_counter
        while True:
            due = clock() + interval
            await asyncio.sleep(interval)
            samples.append(max(0.0, clock() - due))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)


def lag_stats(prefix: str, samples_s: list[float]) -> dict[str, float]:
    """p50/p99/max in milliseconds of lag samples given in seconds."""
    if not samples_s:
        return {}
    arr = np.asarray(samples_s) * 1000.0
    p50, p99 = np.percentile(arr, (50, 99))
    return {f"{prefix}_p50_ms": float(p50), f"{prefix}_p99_ms": float(p99),
            f"{prefix}_max_ms": float(arr.max())}


def judge(client: dict[str, float], max_lag_ms: float) -> str | None:
    """Why the run cannot be trusted as the server's performance, or None if it can.

    A lagging client that used most of its core was the bottleneck; one that used little was
    starved by other work on the machine. Either way its latencies include its own delays.
    """
    for key in ("loop_lag_p99_ms", "send_lag_p99_ms"):
        if client.get(key, 0.0) > max_lag_ms:
            cpu = client.get("cpu_util_max", 1.0)
            if cpu >= 0.5:
                why, fix = ("the client was the bottleneck",
                            "use more client processes, less load, or a faster machine")
            else:
                why = "the client was starved by other work on the machine"
                fix = "use less load or a quieter machine" + (
                    "" if client.get("realtime_processes") else
                    ', or client_priority = "realtime" where the OS allows it')
            return (f"{why}: {key}={client[key]:.1f} ms exceeds {max_lag_ms:g} ms at "
                    f"{cpu:.0%} client CPU ({fix})")
    return None

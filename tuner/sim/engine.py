"""The real-time loop: one task advances the engine core step by step on the wall clock.

Each step sleeps for its simulated duration divided by ``time_scale``, then hands every
emitted token to its request's queue (one ``put_nowait`` per token: no task per token). Step
start times are kept on a schedule (``due``), so a late wake-up shortens the next sleep
instead of drifting.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from tuner.sim.core import EngineCore
from tuner.sim.scheduler import Request

# Wake-ups land up to about a millisecond late (the event loop's timer resolution): sleep
# until this long before the due time, then yield until it has passed.
_SPIN_S = 0.0012
# A step whose tokens leave later than this is counted in tuner_sim:late_steps_total: the
# machine could not keep real time, and client-side timings include that delay.
LATE_S = 0.002


@dataclass(slots=True)
class TokenEvent:
    """One emitted token (``finished`` on the last); ``due`` is its modelled wall time."""

    index: int
    finished: bool
    due: float


class RealtimeEngine:
    """Runs ``core`` in real time (``time_scale`` x faster) inside the running event loop."""

    def __init__(self, core: EngineCore, time_scale: float = 1.0) -> None:
        self.core = core
        self.time_scale = time_scale
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.next_rid = 0
        self.late_steps = 0  # steps whose tokens went out more than LATE_S after their due time
        self.max_lateness = 0.0
        self.clock = time.perf_counter
        self.sim_time = 0.0  # simulated seconds the engine has been busy

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def submit(self, prompt_len: int, max_tokens: int, hashes: list[int]) -> Request:
        """Queue a request; its ``handle`` is an asyncio.Queue of TokenEvents."""
        req = Request(self.next_rid, prompt_len, max_tokens, hashes)
        self.next_rid += 1
        req.handle = asyncio.Queue()
        self.core.add(req)
        self._wake.set()
        return req

    def abort(self, req: Request) -> None:
        """Forget a request whose client went away (its blocks are freed)."""
        sched = self.core.scheduler
        if req in sched.waiting:
            sched.waiting.remove(req)
        elif req in sched.running:
            sched.running.remove(req)
            sched.pool.free(req)
        req.finished = True

    async def _run(self) -> None:
        core, clock = self.core, self.clock
        due = clock()
        while True:
            if not core.has_work():
                self._wake.clear()
                await self._wake.wait()
                due = clock()
                continue
            step, seconds = core.plan_step()
            if not step.work:  # nothing fits now (only after aborts): wait for a change
                self._wake.clear()
                await self._wake.wait()
                due = clock()
                continue
            due = max(due, clock() - 0.05) + seconds / self.time_scale
            await self._sleep_until(due)
            self.sim_time += seconds
            emitted = core.complete(step, seconds)
            late = clock() - due
            if late > LATE_S:
                self.late_steps += 1
                self.max_lateness = max(self.max_lateness, late)
            for req in emitted:
                req.handle.put_nowait(TokenEvent(req.output, req.finished, due))

    async def _sleep_until(self, due: float) -> None:
        clock = self.clock
        ahead = due - clock() - _SPIN_S
        if ahead > 0:
            await asyncio.sleep(ahead)
        while clock() < due:
            await asyncio.sleep(0)

"""The real-time loop: one task advances the engine core step by step on the wall clock.

Each step is applied when it is planned (the model is pure), then the task sleeps for the
step's simulated duration divided by ``time_scale`` and calls every emitting request's
``on_token(index, finished, due)`` synchronously (the HTTP front writes the token to its
socket right there: no task and no queue per token, so 256 streams cost 256 socket writes a
step and nothing more). The writes are paced: the token in place ``i`` of the batch leaves
``i * pace`` after the step's end (``PACE_S``, at most ``PACE_SHARE`` of the step over the
batch), so each stream's token leaves at the same offset every step however long each write
takes, and the interval between two tokens stays exact. Step end times are kept on a
schedule (``due``), so a late wake-up shortens the next sleep instead of drifting.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from tuner.sim.core import EngineCore
from tuner.sim.scheduler import Request

# Wake-ups land up to about a millisecond late (the event loop's timer resolution): sleep
# until this long before the due time, then yield until it has passed.
_SPIN_S = 0.0012
# A step whose tokens leave later than this is counted in tuner_sim:late_steps_total: the
# machine could not keep real time, and client-side timings include that delay.
LATE_S = 0.002
# Writes are paced this far apart (a loopback send takes about 10-18 us here), spreading a
# batch over at most this share of its step.
PACE_S = 20e-6
PACE_SHARE = 0.4


OnToken = Callable[[int, bool, float], None]


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
        # With --sim-trace: (due, lateness, tokens, seconds spent writing tokens, modelled s).
        self.step_log: list[tuple[float, float, int, float, float]] | None = None
        self.clock = time.perf_counter
        self.sim_time = 0.0  # simulated seconds the engine has been busy

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def submit(self, prompt_len: int, max_tokens: int, hashes: list[int],
               on_token: OnToken) -> Request:
        """Queue a request, the core's front-end delay from now; ``on_token(index,
        finished, due)`` is called for each token (``due``: the modelled wall time of the
        token, on ``time.perf_counter``'s clock)."""
        req = Request(self.next_rid, prompt_len, max_tokens, hashes)
        self.next_rid += 1
        req.handle = on_token
        delay = self.core.front_end_s / self.time_scale
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._join, req)
        else:
            self._join(req)
        return req

    def _join(self, req: Request) -> None:
        if not req.finished:  # not aborted on its way to the engine
            self.core.add(req)
            self._wake.set()

    def abort(self, req: Request) -> None:
        """Forget a request whose client went away (its blocks are freed)."""
        sched = self.core.scheduler
        if req.finished:
            return
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
            # The model is pure: apply the step now, so that at its due time only the
            # tokens' writes are left to do.
            self.sim_time += seconds
            tokens = [(r.handle, r.output, r.finished) for r in core.complete(step, seconds)]
            await self._sleep_until(due)
            start = clock()
            pace = min(PACE_S, PACE_SHARE * seconds / self.time_scale / max(len(tokens), 1))
            for pos, (handle, index, finished) in enumerate(tokens):
                at = start + pos * pace
                while clock() < at:
                    pass
                handle(index, finished, due)
            late = start - due
            if late > LATE_S:
                self.late_steps += 1
                self.max_lateness = max(self.max_lateness, late)
            if self.step_log is not None:
                self.step_log.append((due, late, step.num_tokens, clock() - start, seconds))

    async def _sleep_until(self, due: float) -> None:
        clock = self.clock
        ahead = due - clock() - _SPIN_S
        if ahead > 0:
            await asyncio.sleep(ahead)
        while clock() < due:
            await asyncio.sleep(0)

"""The engine core under open-loop arrivals, offline: requests join at given times, not when
another finishes (pure, no clock).

This is how a real latency-vs-load ladder is replayed on the model exactly: `vllm bench
serve --save-detailed` records each request's start time and lengths, and the same times and
lengths drive the same ``EngineCore`` the HTTP simulator runs, without a clock and
without a client's or server's scheduling noise. Per request the result keeps its TTFT
and its inter-token latencies, as vLLM's benchmark measures them (time from arrival to the
first token, then between successive tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tuner.sim.config import resolve
from tuner.sim.core import EngineCore
from tuner.sim.profiles import EngineConstants, engine_constants, load_gpu
from tuner.sim.scheduler import Request
from tuner.sim.shape import LLAMA3_8B, ModelShape
from tuner.sim.startup import StartFailure, check_start


@dataclass(frozen=True)
class OpenLoopRun:
    """Per-request figures of one replay, in simulated seconds, in arrival order."""

    ttfts: tuple[float, ...]
    itls: tuple[tuple[float, ...], ...]
    duration_s: float  # first arrival to last token
    output_tokens: int


def engine_core(flags: Mapping[str, Any], gpu: str, consts: EngineConstants | None = None,
                shape: ModelShape = LLAMA3_8B) -> EngineCore | StartFailure:
    """A fresh engine core for the engine ``flags`` on GPU profile ``gpu`` (with constants
    ``consts``, by default the profiles' own for that GPU), as the served simulator builds it; the start's
    failure where vLLM would refuse the flags."""
    g, consts = load_gpu(gpu), consts or engine_constants(gpu)
    cfg = resolve(flags, shape, g)
    plan = check_start(cfg, shape, g, consts)
    return plan if isinstance(plan, StartFailure) else EngineCore(cfg, shape, g, consts, plan)


def run_open_loop(core: EngineCore, arrivals: Sequence[float], prompt_lens: Sequence[int],
                  output_lens: Sequence[int], front_end_s: float | None = None) -> OpenLoopRun:
    """Replay requests arriving at ``arrivals`` (seconds, any origin, not decreasing) with
    those prompt and output lengths on ``core``, until every one has finished.

    A request reaches the engine's queue ``front_end_s`` after it arrives (the API server's
    share of its TTFT: parsing, tokenising, handing it to the engine core; by default the
    core's own, from its constants' ``front_end_ms``); one that reaches it while a step runs
    waits for the next step, as in vLLM; an idle engine waits for the next request. Raises ``ValueError`` when the lists differ
    in length or the arrivals go back in time, ``RuntimeError`` when the engine stalls with
    work queued (a request the configuration can never schedule).
    """
    n = len(arrivals)
    if not (len(prompt_lens) == len(output_lens) == n):
        raise ValueError("arrivals, prompt_lens and output_lens differ in length")
    if any(b < a for a, b in zip(arrivals, arrivals[1:])):
        raise ValueError("arrivals must not decrease")
    if n == 0:
        return OpenLoopRun((), (), 0.0, 0)
    if front_end_s is None:
        front_end_s = core.front_end_s
    origin = arrivals[0]
    at = [a - origin for a in arrivals]  # arrivals, from the first
    joins = [a + front_end_s for a in at]  # when each reaches the engine's queue
    ttft = [0.0] * n
    itls: list[list[float]] = [[] for _ in range(n)]
    last = [0.0] * n
    t, joined, output_tokens = 0.0, 0, 0
    while joined < n or core.has_work():
        while joined < n and joins[joined] <= t:
            core.add(Request(joined, int(prompt_lens[joined]), int(output_lens[joined])))
            joined += 1
        if not core.has_work():
            t = joins[joined]
            continue
        t, emitted = _step(core, t, at, ttft, itls, last)
        output_tokens += len(emitted)
    return OpenLoopRun(tuple(ttft), tuple(tuple(x) for x in itls), t, output_tokens)


def _step(core: EngineCore, t: float, sent: Sequence[float], ttft: list[float],
          itls: list[list[float]], last: list[float]) -> tuple[float, list[Request]]:
    """One engine step from time ``t``: the time after it and the requests that emitted a
    token in it, their TTFT (from ``sent``) or inter-token latency noted."""
    step, dt = core.plan_step()
    if not step.work:
        raise RuntimeError("simulated engine stalled with work queued")
    t += dt
    emitted = core.complete(step, dt)
    for r in emitted:
        i = r.rid
        if r.output == 1:
            ttft[i] = t - sent[i]
        else:
            itls[i].append(t - last[i])
        last[i] = t
    return t, emitted


@dataclass(frozen=True)
class ClosedLoopRun(OpenLoopRun):
    """``OpenLoopRun``'s figures of a closed-loop replay, and when each request was sent
    (simulated seconds from the first)."""

    starts: tuple[float, ...] = ()


def run_closed_loop(core: EngineCore, concurrency: int, prompt_lens: Sequence[int],
                    output_lens: Sequence[int], front_end_s: float = 0.0) -> ClosedLoopRun:
    """Replay requests of those prompt and output lengths on ``core`` with ``concurrency``
    clients: each sends its next request as soon as its last one finished (no think
    time), as a benchmark's closed loop does, until every one has finished. The figures
    are as ``run_open_loop``'s, TTFT counted from a request's send. Raises ``ValueError``
    when the lists differ in length or ``concurrency`` is below 1, ``RuntimeError`` when
    the engine stalls with work queued."""
    n = len(prompt_lens)
    if len(output_lens) != n or concurrency < 1:
        raise ValueError("prompt_lens and output_lens differ in length, or no client")
    starts, ttft = [0.0] * n, [0.0] * n
    itls: list[list[float]] = [[] for _ in range(n)]
    last = [0.0] * n
    pending: list[tuple[float, int]] = []  # (when it reaches the queue, request)
    t, sent, output_tokens = 0.0, 0, 0

    def send(now: float) -> None:
        nonlocal sent
        starts[sent] = now
        pending.append((now + front_end_s, sent))
        sent += 1

    while sent < min(concurrency, n):
        send(0.0)
    while pending or core.has_work():
        for at, i in [p for p in pending if p[0] <= t]:
            core.add(Request(i, int(prompt_lens[i]), int(output_lens[i])))
            pending.remove((at, i))
        if not core.has_work():
            t = min(at for at, _ in pending)
            continue
        t, emitted = _step(core, t, starts, ttft, itls, last)
        output_tokens += len(emitted)
        for r in emitted:
            if r.finished and sent < n:
                send(t)
    return ClosedLoopRun(tuple(ttft), tuple(tuple(x) for x in itls), t, output_tokens,
                         starts=tuple(starts))

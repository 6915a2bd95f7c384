"""The real-time loop on a real engine core and the wall clock: a step's tokens leave in
batch order, paced, never before the step's end; every request gets all its tokens."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from tuner.sim.config import resolve
from tuner.sim.core import EngineCore
from tuner.sim.engine import PACE_S, PACE_SHARE, RealtimeEngine
from tuner.sim.profiles import engine_constants, load_gpu
from tuner.sim.shape import LLAMA3_8B
from tuner.sim.startup import check_start


def core() -> EngineCore:
    gpu, consts = load_gpu("h200"), engine_constants()
    cfg = resolve({"max_num_seqs": 16}, LLAMA3_8B, gpu)
    return EngineCore(cfg, LLAMA3_8B, gpu, consts, check_start(cfg, LLAMA3_8B, gpu, consts))


def test_a_steps_tokens_leave_in_order_paced_from_its_due_time():
    written: dict[float, list[tuple[float, int]]] = defaultdict(list)  # due -> (time, rid)
    counts: dict[int, int] = defaultdict(int)

    async def main() -> RealtimeEngine:
        engine = RealtimeEngine(core(), time_scale=1.0)
        engine.step_log = []
        engine.start()
        done = [asyncio.get_running_loop().create_future() for _ in range(12)]

        def sink(rid: int):
            def on_token(index: int, finished: bool, due: float) -> None:
                written[due].append((time.perf_counter(), rid))
                counts[rid] += 1
                if finished:
                    done[rid].set_result(index)
            return on_token
        for rid in range(12):
            engine.submit(64, 6, [], sink(rid))
        await asyncio.gather(*done)
        await engine.stop()
        return engine

    engine = asyncio.run(main())
    assert dict(counts) == {rid: 6 for rid in range(12)}
    seconds = {due: s for due, _, _, _, s in engine.step_log}
    for due, tokens in written.items():
        pace = min(PACE_S, PACE_SHARE * seconds[due] / len(tokens))
        for pos, (at, _) in enumerate(tokens):
            assert at >= due + pos * pace, (pos, at - due, pace)
        if len(tokens) > 1:  # decode steps: the same requests in the same order each time
            assert [rid for _, rid in tokens] == sorted(rid for _, rid in tokens)


def delayed_core(front_end_ms: float) -> EngineCore:
    import dataclasses

    gpu = load_gpu("h200")
    consts = dataclasses.replace(engine_constants(), front_end_ms=front_end_ms)
    cfg = resolve({"max_num_seqs": 16}, LLAMA3_8B, gpu)
    return EngineCore(cfg, LLAMA3_8B, gpu, consts, check_start(cfg, LLAMA3_8B, gpu, consts))


def test_a_request_reaches_the_engine_its_front_end_delay_after_it_is_submitted():
    async def main() -> tuple[bool, float, float]:
        engine = RealtimeEngine(delayed_core(200.0), time_scale=2.0)  # 100 ms of wall time
        engine.start()
        first = asyncio.get_running_loop().create_future()

        def on_token(index: int, finished: bool, due: float) -> None:
            if not first.done():
                first.set_result(due)
        sent = time.perf_counter()
        engine.submit(64, 2, [], on_token)
        queued_at_once = engine.core.has_work()
        due = await first
        await engine.stop()
        return queued_at_once, sent, due

    queued_at_once, sent, due = asyncio.run(main())
    assert not queued_at_once
    assert due - sent >= 0.095  # never before the delay (the loop's timer may fire ~1 ms early)


def test_a_request_aborted_on_its_way_to_the_engine_never_joins_it():
    async def main() -> tuple[bool, int]:
        engine = RealtimeEngine(delayed_core(40.0))
        engine.start()
        tokens = []
        req = engine.submit(64, 2, [], lambda index, finished, due: tokens.append(index))
        engine.abort(req)
        await asyncio.sleep(0.2)
        await engine.stop()
        return engine.core.has_work(), len(tokens)

    assert asyncio.run(main()) == (False, 0)

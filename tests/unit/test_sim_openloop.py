"""The engine core replayed under open-loop arrivals: lone requests see an idle engine, a
request that comes while another is served waits, every token is accounted for."""

from __future__ import annotations

import pytest

from tuner.sim.config import resolve
from tuner.sim.core import EngineCore
from tuner.sim.openloop import run_open_loop
from tuner.sim.profiles import engine_constants, load_gpu
from tuner.sim.shape import LLAMA3_8B
from tuner.sim.startup import check_start


def core(**flags) -> EngineCore:
    gpu, consts = load_gpu("h100"), engine_constants()
    cfg = resolve(flags, LLAMA3_8B, gpu)
    return EngineCore(cfg, LLAMA3_8B, gpu, consts, check_start(cfg, LLAMA3_8B, gpu, consts))


def test_lone_requests_far_apart_see_the_same_idle_engine():
    run = run_open_loop(core(), [5.0, 15.0, 25.0], [1024] * 3, [16] * 3)
    assert run.ttfts[0] > 0
    assert run.ttfts[1] == pytest.approx(run.ttfts[0]) == pytest.approx(run.ttfts[2])
    assert [len(x) for x in run.itls] == [15, 15, 15]
    assert run.output_tokens == 48
    # the origin is the first arrival; the last request ends after its own arrival
    assert 20.0 < run.duration_s < 21.0


def test_a_request_that_comes_during_anothers_prefill_waits_for_it():
    alone = run_open_loop(core(max_num_batched_tokens=1024), [0.0], [1024], [4])
    both = run_open_loop(core(max_num_batched_tokens=1024), [0.0, 0.001], [1024, 1024], [4, 4])
    assert both.ttfts[0] == pytest.approx(alone.ttfts[0])
    # the second prompt cannot share the first's full step: it waits, then has its own
    assert both.ttfts[1] > alone.ttfts[0]
    # the first request's next token waits on the step that prefills the second
    assert max(both.itls[0]) > max(alone.itls[0])


def test_a_small_budget_splits_a_lone_prompt_over_several_steps():
    whole = run_open_loop(core(max_num_batched_tokens=2048), [0.0], [2048], [2])
    split = run_open_loop(core(max_num_batched_tokens=256), [0.0], [2048], [2])
    assert split.ttfts[0] > whole.ttfts[0]  # eight steps' fixed costs instead of one


def test_inputs_that_cannot_be_replayed_are_refused():
    with pytest.raises(ValueError, match="differ in length"):
        run_open_loop(core(), [0.0, 1.0], [10], [10, 10])
    with pytest.raises(ValueError, match="must not decrease"):
        run_open_loop(core(), [1.0, 0.5], [10, 10], [10, 10])
    assert run_open_loop(core(), [], [], []).output_tokens == 0


def test_the_front_end_delays_when_a_request_reaches_the_engine_not_its_arrival():
    plain = run_open_loop(core(), [0.0, 10.0], [1024, 1024], [8, 8])
    later = run_open_loop(core(), [0.0, 10.0], [1024, 1024], [8, 8], front_end_s=0.012)
    assert later.ttfts[0] == pytest.approx(plain.ttfts[0] + 0.012)
    assert later.ttfts[1] == pytest.approx(plain.ttfts[1] + 0.012)
    for a, b in zip(later.itls, plain.itls):
        assert a == pytest.approx(b)


def test_the_front_end_delay_is_the_cores_own_unless_given():
    import dataclasses

    gpu, consts = load_gpu("h100"), engine_constants()
    cfg = resolve({}, LLAMA3_8B, gpu)
    slow = dataclasses.replace(consts, front_end_ms=12.0)
    delayed = EngineCore(cfg, LLAMA3_8B, gpu, slow, check_start(cfg, LLAMA3_8B, gpu, slow))
    plain = run_open_loop(core(), [0.0, 10.0], [1024, 1024], [8, 8], front_end_s=0.0)
    later = run_open_loop(delayed, [0.0, 10.0], [1024, 1024], [8, 8])
    assert later.ttfts[0] == pytest.approx(plain.ttfts[0] + 0.012)

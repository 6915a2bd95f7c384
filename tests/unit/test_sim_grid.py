"""The offline evaluator: the H200 measurement before calibration, and the article's laws."""

from __future__ import annotations

import math

import pytest

from tuner.sim.grid import SimOutcome, evaluate, evaluate_grid, grid_points, pareto_front
from tuner.sim.profiles import load_gpu
from tuner.sim.shape import LLAMA3_8B
from tuner.sim.workload import SimWorkload

pytestmark = pytest.mark.unit
H200 = load_gpu("h200")


def _w(concurrency, requests, input_len, output_len, range_ratio=0.0, **more) -> SimWorkload:
    return SimWorkload(max_concurrency=concurrency, num_requests=requests, input_len=input_len,
                       output_len=output_len, range_ratio=range_ratio, **more)


# A mixed load: prompts and outputs of varied lengths, so prefills keep arriving mid-decode.
MIXED = SimWorkload(max_concurrency=256, num_requests=600, input_len=1024, output_len=128,
                    range_ratio=0.5)


def test_default_configuration_matches_the_h200_measurement():
    """vLLM 0.24.0 on an H200, defaults, random 1024 in / 128 out, 1,000 requests at
    concurrency 256: about 3,860 output tokens/s and p99 ITL about 209 ms (VLLM.md)."""
    out = evaluate({}, LLAMA3_8B, H200, _w(256, 1000, 1024, 128))
    assert out.started
    assert out.output_throughput == pytest.approx(3860, rel=0.25)
    assert out.p99_itl_ms == pytest.approx(209, rel=0.25)
    assert out.kv_cache_tokens == pytest.approx(920_192, rel=0.02)


def test_chunked_prefill_with_a_small_budget_lowers_p99_itl_and_costs_throughput():
    base = {"max_model_len": 2048, "enable_prefix_caching": False}
    small = evaluate({**base, "max_num_batched_tokens": 256}, LLAMA3_8B, H200, MIXED)
    off = evaluate({**base, "enable_chunked_prefill": False}, LLAMA3_8B, H200, MIXED)
    big = evaluate({**base, "max_num_batched_tokens": 8192}, LLAMA3_8B, H200, MIXED)
    assert small.p99_itl_ms < off.p99_itl_ms / 5
    assert small.p99_itl_ms < big.p99_itl_ms / 5
    assert small.output_throughput < off.output_throughput
    assert small.output_throughput < big.output_throughput


def test_prefix_caching_pays_on_shared_prefixes_only():
    shared = _w(64, 300, 128, 64, 0.5, num_prefixes=4, prefix_len=1024)
    random = _w(64, 300, 1024, 64, 0.5)
    on = {"max_model_len": 2048, "enable_prefix_caching": True}
    off = {**on, "enable_prefix_caching": False}
    hit, miss = (evaluate(f, LLAMA3_8B, H200, shared) for f in (on, off))
    assert hit.output_throughput > 1.5 * miss.output_throughput
    assert hit.prefix_cache_hit_rate > 0.5
    same_on, same_off = (evaluate(f, LLAMA3_8B, H200, random) for f in (on, off))
    assert same_on.output_throughput == pytest.approx(same_off.output_throughput, rel=1e-9)
    assert same_on.prefix_cache_hit_rate == 0


def test_enforce_eager_slows_decode_steps():
    w = _w(64, 200, 512, 128)
    graphs = evaluate({"max_model_len": 2048}, LLAMA3_8B, H200, w)
    eager = evaluate({"max_model_len": 2048, "enforce_eager": True}, LLAMA3_8B, H200, w)
    assert eager.median_itl_ms > graphs.median_itl_ms * 1.1
    assert eager.output_throughput < graphs.output_throughput
    assert eager.kv_cache_tokens >= graphs.kv_cache_tokens


def test_refused_starts_are_outcomes_not_exceptions():
    w = _w(8, 16, 128, 16)
    out = evaluate({"enable_chunked_prefill": False, "max_model_len": 2048,
                    "max_num_batched_tokens": 128}, LLAMA3_8B, H200, w)
    assert not out.started and out.failure_kind == "invalid_config"
    assert "smaller than max_model_len" in out.failure_message
    short = evaluate({"max_model_len": 128}, LLAMA3_8B, H200, w)
    assert not short.started and short.failure_kind == "workload_too_long"


def test_grid_and_pareto_front():
    axes = {"max_num_batched_tokens": (256, 2048), "enable_chunked_prefill": (False, True),
            "max_model_len": (2048,)}
    points = grid_points(axes)
    assert len(points) == 4
    outs = evaluate_grid(points, LLAMA3_8B, H200, _w(32, 64, 512, 32, 0.5), processes=1)
    assert [o.flags["max_num_batched_tokens"] for o in outs] == [256, 256, 2048, 2048]
    front = pareto_front(outs)
    assert front and all(o.started for o in front)
    for o in outs:  # nothing off the front dominates a point on it
        for f in front:
            assert not (o.output_throughput > f.output_throughput and o.p99_itl_ms < f.p99_itl_ms)
    assert json_safe(outs[0])


def json_safe(o: SimOutcome) -> bool:
    return all(not (isinstance(v, float) and math.isnan(v)) for v in o.to_dict().values())


@pytest.mark.parametrize("flags, workload", [
    ({}, _w(256, 300, 1024, 128, 0.5)),
    ({"enable_chunked_prefill": False, "max_model_len": 2048}, _w(64, 200, 512, 64, 0.5)),
    ({"max_num_batched_tokens": 256, "enforce_eager": True}, _w(128, 200, 1024, 64, 0.3)),
    ({"max_model_len": 2048}, _w(64, 200, 128, 64, 0.5, num_prefixes=4, prefix_len=1024)),
    ({"max_model_len": 2048, "enable_chunked_prefill": False},
     _w(64, 200, 128, 64, 0.5, num_prefixes=4, prefix_len=1024)),
    ({"gpu_memory_utilization": 0.13, "max_model_len": 2048}, _w(256, 200, 1024, 128, 0.5)),
])
def test_fast_loop_gives_the_reference_schedulers_outcome(flags, workload):
    """The grid's lazy-decode loop and the step-by-step scheduler agree exactly (the last
    case preempts, where the evaluator falls back to the reference)."""
    fast = evaluate(flags, LLAMA3_8B, H200, workload, fast=True).to_dict()
    slow = evaluate(flags, LLAMA3_8B, H200, workload, fast=False).to_dict()
    assert fast == slow

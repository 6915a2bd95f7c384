"""The load ladder on the real vLLM CPU build: one warm-up at full load, then open-loop
levels on the same server, and the curve it records (tuner.capacity.run_ladder). Rates and
latencies are whatever this machine gives; the test checks what the curve must say about
them, never how fast they are."""

from __future__ import annotations

import asyncio

import pytest

from tuner.capacity.run import run_ladder
from tuner.loadgen import SLO, LoadSpec, WorkloadSpec, run_benchmark
from tuner.loadgen.ladder import LadderPlan, level_requests
from tuner.testing.traces import TraceShape, write_trace
from tuner.trials.curve import Curve, objective_figures

pytestmark = pytest.mark.e2e

SLO_ITL_MS, SLO_TTFT_MS = 500.0, 3000.0


def test_a_ladder_on_the_real_server_records_its_curve(tiny_server, tiny_model_dir):
    workload = WorkloadSpec(input_len=32, output_len=16, vocab_size=1000)
    # a loaded 2-core box: judge the client's lag and the gaps it sees loosely
    load = LoadSpec(max_concurrency=4, num_requests=24, warmup_requests=2,
                    max_client_lag_ms=200.0, min_gap_share=0.0)
    levels = []
    run = asyncio.run(run_ladder(
        tiny_server.server.url, str(tiny_model_dir), workload, load,
        SLO(ttft_p99_ms=SLO_TTFT_MS, itl_p99_ms=SLO_ITL_MS), LadderPlan(max_levels=3),
        level_s=6.0, on_level=lambda k, n, rate: levels.append((k, n, rate))))
    curve = Curve.from_json(run.curve.to_json())  # what a trial stores, read back
    assert run.warmup.metrics["completed"] == 24 and curve.saturated_rps > 0
    assert 1 <= len(curve.levels) <= 3
    assert [k for k, _, _ in levels] == list(range(1, len(curve.levels) + 1))
    assert [r for _, _, r in levels] == [lv.offered_rps for lv in curve.levels]
    assert curve.levels[0].offered_rps == pytest.approx(curve.saturated_rps / 2)
    for lv in curve.levels:
        assert lv.requests and lv.requests > 0 and lv.output_throughput > 0
        assert lv.p50_itl_ms <= lv.p99_itl_ms and lv.p50_ttft_ms <= lv.p99_ttft_ms
        if lv.held:
            assert (lv.judged("p99_itl_ms") <= SLO_ITL_MS
                    and lv.judged("p99_ttft_ms") <= SLO_TTFT_MS)
        # the one verdict, stored with the level: each limit's margin and its interval
        assert set(lv.margins) >= {"p99_itl_ms", "p99_ttft_ms"}
        assert lv.held == (lv.verdict(curve.own_slo).held and not lv.failed
                           and lv.invalid_reason is None and not lv.stopped_early)
        assert lv.estimates is not None
    # the record carries the capacity as an estimate with its interval
    told = objective_figures(curve, None)
    est = curve.estimate()
    if est is None:  # a loaded box: every level measured the client, nothing to fit
        assert all(lv.invalid_reason for lv in curve.levels) and "capacity_rps" not in told
        return
    assert told["capacity_rps"] == est.point == curve.capacity_rps
    assert told["capacity_rps_lower"] == est.lower and told["capacity_rps_upper"] == est.upper
    top = max(lv.offered_rps for lv in curve.levels)
    assert 0.0 <= est.lower <= est.point <= est.upper <= top
    assert told["capacity_censored"] == float(est.censored)
    assert curve.verdict in ("bracketed", "none-held", "budget")


# A short trace of short requests, a few a second as recorded (prompts within the
# server's --max-model-len, each one prefix block at most).
TRACE = TraceShape(requests=40, rate=2.0, input_median=24.0, input_sigma=0.3,
                   output_median=12.0, output_sigma=0.3, max_input=64, max_output=16)


def test_a_ladder_on_a_trace_replays_it_at_speed_ups_on_the_real_server(tiny_server,
                                                                        tiny_model_dir,
                                                                        tmp_path):
    """As a trace study's trial measures it (``tuner.runner.measure``): the replay at the
    study's speed-up (fast, capped at 4 in flight: it saturates), then ladder levels on
    the same server, each the trace at the speed-up that offers the level's rate."""
    write_trace(tmp_path / "t.jsonl", TRACE)
    workload = WorkloadSpec(kind="trace", trace=str(tmp_path / "t.jsonl"), vocab_size=1000)
    replay = LoadSpec(speedup=50.0, max_concurrency=4, num_requests=24, warmup_requests=2,
                      max_client_lag_ms=200.0, min_gap_share=0.0)
    slo, level_s = SLO(ttft_p99_ms=SLO_TTFT_MS, itl_p99_ms=SLO_ITL_MS), 4.0
    url, model = tiny_server.server.url, str(tiny_model_dir)

    async def trial():
        first = await run_benchmark(url, model, workload, replay, slo=slo)
        return first, await run_ladder(url, model, workload, replay, slo,
                                       LadderPlan(max_levels=2), level_s=level_s,
                                       warmup=first)

    first, run = asyncio.run(trial())
    curve = run.curve
    curve = Curve.from_json(curve.to_json())
    assert first.metrics["completed"] == 24 and curve.saturated_rps > 0
    assert 1 <= len(curve.levels) <= 2
    assert curve.levels[0].offered_rps == pytest.approx(curve.saturated_rps / 2)
    for lv in curve.levels:  # the trace's first rate x level_s requests, the trace at most
        if not lv.stopped_early:
            assert lv.requests == min(level_requests(lv.offered_rps, level_s),
                                      TRACE.requests), lv
        assert lv.output_throughput > 0 and lv.p50_ttft_ms <= lv.p99_ttft_ms
        if lv.held:
            assert lv.judged_p99_itl_ms <= SLO_ITL_MS and lv.judged_p99_ttft_ms <= SLO_TTFT_MS
    est = curve.estimate()
    if est is None:  # a loaded box: every level measured the client, nothing to fit
        assert all(lv.invalid_reason for lv in curve.levels)
    else:  # never more than the curve's highest level, and 0 when none held
        assert 0.0 <= est.point <= max(lv.offered_rps for lv in curve.levels)
        assert est.point > 0 or not any(lv.held for lv in curve.levels)

"""The ladder's levels as load specs and as curve levels (tuner.capacity.run, no I/O)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from tuner.errors import UsageError
from tuner.loadgen.benchmark import BenchmarkResult, schedule, window_slo_metrics
from tuner.capacity.run import achieved_rps, level_load, level_of, stops_on_miss
from tuner.loadgen.ladder import LadderPlan
from tuner.loadgen.metrics import to_wall_time
from tuner.loadgen.spec import SLO, LoadSpec, WorkloadSpec

pytestmark = pytest.mark.unit
CLOSED = LoadSpec(max_concurrency=64, num_requests=200, warmup_requests=16, burstiness=0.5,
                  early_stop=True)


def test_a_level_is_an_open_loop_of_rate_x_duration_requests_at_the_wall_rate():
    level = level_load(CLOSED, 3.0, 60.0, time_scale=4.0)
    assert level.request_rate == 12.0 and level.num_requests == 180
    assert level.duration_s is None  # a count: the schedule offers exactly the rate
    assert level.max_concurrency is None and not level.closed_loop
    assert level.warmup_requests == 0 and not level.early_stop
    assert level.burstiness == 0.5  # the study's arrivals still apply


def test_a_level_too_large_to_schedule_is_refused():
    with pytest.raises(UsageError, match="num_requests"):
        level_load(CLOSED, 1e5, 1e5)


def test_a_level_on_a_trace_is_the_speed_up_that_offers_its_rate(tmp_path):
    trace = _trace(tmp_path, [0, 1000, 2000, 3000, 4000])  # one request a second
    replay = LoadSpec(speedup=1.0, max_concurrency=16, num_requests=5, warmup_requests=2)
    level = level_load(replay, 3.0, 1.0, workload=trace)
    assert level.speedup == pytest.approx(3.0) and math.isinf(level.request_rate)
    assert level.num_requests == 3 and level.max_concurrency is None
    assert level.warmup_requests == 0 and not level.closed_loop
    assert schedule(trace, level) == pytest.approx([0.0, 1 / 3, 2 / 3])
    # on a simulator 2x faster than real time, the wall clock's speed-up is twice that
    fast = level_load(replay, 3.0, 1.0, time_scale=2.0, workload=trace)
    assert fast.speedup == pytest.approx(6.0) and fast.num_requests == 3


def test_a_level_longer_than_its_trace_replays_the_trace_once(tmp_path):
    trace = _trace(tmp_path, [0, 1000, 2000, 3000, 4000])
    level = level_load(LoadSpec(speedup=1.0), 3.0, 10.0, workload=trace)  # 30 wanted
    assert level.num_requests == 5 and level.speedup == pytest.approx(3.0)
    assert schedule(trace, level) == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0, 4 / 3])


def test_a_trace_load_is_refused_without_its_trace():
    with pytest.raises(UsageError, match="needs the trace workload"):
        level_load(LoadSpec(speedup=1.0), 3.0, 10.0)


def _trace(folder, stamps_ms) -> WorkloadSpec:
    path = folder / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": 8,
                                        "output_length": 2}) + "\n" for t in stamps_ms))
    return WorkloadSpec(kind="trace", trace=str(path))


LIMITS = SLO(ttft_p99_ms=500.0, itl_p99_ms=50.0)
JUDGED = LIMITS.judged(0.05)  # as the ladder judges its levels: its tolerance for the backlog


def result(valid: bool = True, failed: int = 0, window=None, time_scale: float = 1.0,
           **more) -> BenchmarkResult:
    metrics = {"completed": 90, "failed": failed, "duration": 30.0, "request_throughput": 3.0,
               "output_throughput": 384.0, "median_ttft_ms": 50.0, "p99_ttft_ms": 400.0,
               "median_itl_ms": 20.0, "p99_itl_ms": 45.0, "request_goodput": 2.4,
               "p99_tpot_ms": 25.0, "p99_e2el_ms": 4000.0, **more}
    return BenchmarkResult(metrics=metrics, failures={}, server={}, client={}, valid=valid,
                           invalid_reason=None if valid else "the client lagged", noise={},
                           window=window, time_scale=time_scale)


def test_a_level_keeps_the_run_figures_and_vllms_goodput():
    lv = level_of(3.1, result(), JUDGED)
    assert (lv.offered_rps, lv.achieved_rps, lv.output_throughput) == (3.1, 3.0, 384.0)
    assert (lv.p50_ttft_ms, lv.p99_ttft_ms, lv.p50_itl_ms, lv.p99_itl_ms) == (50, 400, 20, 45)
    assert (lv.p99_tpot_ms, lv.p99_e2el_ms) == (25.0, 4000.0)
    assert lv.goodput_rps == 2.4 and lv.slo_attainment == pytest.approx(72 / 90)
    assert lv.held and lv.requests == 90 and lv.invalid_reason is None
    assert lv.margins["p99_itl_ms"]["margin"] == pytest.approx(0.9)
    assert lv.margins["p99_ttft_ms"]["margin"] == pytest.approx(0.8)
    assert set(lv.margins) == {"p99_ttft_ms", "p99_itl_ms"}  # no trend: no backlog judged


@pytest.mark.parametrize("why", [{"p99_ttft_ms": 501.0}, {"p99_itl_ms": 50.5},
                                 {"failed": 1}, {"valid": False}, {"completed": 0}])
def test_a_level_does_not_hold_when_an_slo_fails_a_request_fails_or_the_run_is_invalid(why):
    lv = level_of(3.1, result(**why), JUDGED)
    assert lv.held is False
    if "failed" in why:
        assert lv.slo_attainment == pytest.approx(72 / 91)


def test_the_level_is_judged_by_the_slo_not_by_the_runs_own_slo_met():
    assert level_of(3.1, result(slo_met=0.0, window_slo_met=0.0), JUDGED).held is True
    assert level_of(3.1, result(slo_met=1.0, p99_itl_ms=60.0), JUDGED).held is False


@pytest.mark.parametrize(("limits", "over"), [({"tpot_ms": 30.0}, {"p99_tpot_ms": 31.0}),
                                              ({"e2el_ms": 5000.0}, {"p99_e2el_ms": 5001.0})])
def test_a_p99_tpot_or_e2el_limit_is_judged_although_ttft_and_itl_hold(limits, over):
    slo = SLO(ttft_p99_ms=500.0, itl_p99_ms=50.0, **limits).judged(0.05)
    assert level_of(3.1, result(), slo).held is True
    lv = level_of(3.1, result(**over), slo)
    figure = next(iter(over))
    assert lv.held is False and lv.margins[figure]["margin"] > 1.0
    assert max(lv.margins.values(), key=lambda m: m["margin"]) is lv.margins[figure]


def test_a_limited_figure_the_run_did_not_measure_does_not_hold():
    unmeasured = result()
    del unmeasured.metrics["p99_tpot_ms"]
    assert level_of(3.1, unmeasured, SLO(tpot_ms=30.0).judged(0.05)).held is False


def test_a_level_whose_time_in_system_grows_past_the_tolerance_does_not_hold():
    growing = {"start": 1.0, "end": 6.0, "seconds": 5.0, "requests": 40, "latency_trend": 0.2}
    lv = level_of(3.1, result(window=growing), LIMITS.judged(0.05))
    assert lv.held is False and lv.latency_trend == 0.2
    assert lv.margins["backlog"]["margin"] == pytest.approx(1.2 / 1.05)
    assert level_of(3.1, result(window=growing), LIMITS.judged(0.25)).held is True
    assert level_of(3.1, result(window=growing), LIMITS.judged(None)).held is True


def test_the_backlogs_standard_error_is_kept_and_gives_its_margin_an_interval():
    window = {"start": 1.0, "end": 6.0, "seconds": 5.0, "requests": 40,
              "latency_trend": 0.04, "latency_trend_se": 0.01}
    lv = level_of(3.1, result(window=window), JUDGED)
    assert lv.held and lv.latency_trend_se == 0.01
    backlog = lv.margins["backlog"]
    assert backlog["margin"] == pytest.approx(1.04 / 1.05)
    assert backlog["lower"] < backlog["margin"] < 1.0
    assert backlog["upper"] > 1.0  # within the tolerance, but not surely


def test_a_level_is_judged_on_its_steady_state_where_it_has_one():
    flattered = result(window_p99_itl_ms=60.0)  # the whole run's 45 includes the ramp
    lv = level_of(3.1, flattered, JUDGED)
    assert lv.held is False and lv.steady_p99_itl_ms == 60.0 and lv.p99_itl_ms == 45.0
    assert lv.margins["p99_itl_ms"]["margin"] == pytest.approx(60.0 / 50.0)
    steady_within = result(p99_ttft_ms=600.0, window_p99_ttft_ms=450.0)
    assert level_of(3.1, steady_within, JUDGED).held is True
    tpot = SLO(tpot_ms=30.0, e2el_ms=5000.0).judged(0.05)
    assert level_of(3.1, result(window_p99_tpot_ms=31.0), tpot).held is False
    assert level_of(3.1, result(window_p99_e2el_ms=6000.0), tpot).held is False
    assert level_of(3.1, result(p99_tpot_ms=40.0, window_p99_tpot_ms=29.0), tpot).held


def test_a_levels_margins_carry_the_intervals_of_its_steady_p99s():
    estimates = {"p99_itl_ms": {"value": 45.0, "lower": 40.0, "upper": 48.0, "n": 900,
                                "n_eff": 800.0, "method": "order"},
                 "p99_ttft_ms": {"value": 400.0, "lower": 300.0, "upper": 480.0, "n": 80,
                                 "n_eff": 80.0, "method": "tail"}}
    window = {"start": 1.0, "end": 6.0, "seconds": 5.0, "requests": 40,
              "estimates": estimates}
    lv = level_of(3.1, result(window=window, window_p99_itl_ms=45.0,
                              window_p99_ttft_ms=400.0), JUDGED)
    assert lv.estimates == estimates and lv.held
    itl = lv.margins["p99_itl_ms"]
    assert (itl["lower"], itl["margin"], itl["upper"]) == pytest.approx((0.8, 0.9, 0.96))
    point = lv.point(JUDGED)
    assert (point.value, point.lower, point.upper) == pytest.approx((0.9, 0.8, 0.96))
    assert lv.verdict(JUDGED).certain
    unbounded = dict(estimates, p99_ttft_ms={**estimates["p99_ttft_ms"], "upper": None})
    at_limit = level_of(3.1, result(window={**window, "estimates": unbounded}), JUDGED)
    assert at_limit.held and not at_limit.verdict(JUDGED).certain


def test_the_window_meets_the_slo_on_its_own_figures_when_it_has_every_one():
    figures = {"p99_ttft_ms": 900.0, "p99_itl_ms": 60.0}
    m = window_slo_metrics(figures, SLO(ttft_p99_ms=1000.0, itl_p99_ms=50.0))
    assert m == {"window_p99_ttft_ms": 900.0, "window_p99_itl_ms": 60.0, "window_slo_met": 0.0}
    assert window_slo_metrics(figures, SLO(ttft_p99_ms=1000.0))["window_slo_met"] == 1.0
    assert "window_slo_met" not in window_slo_metrics(figures, SLO(e2el_ms=5000.0))
    assert "window_slo_met" not in window_slo_metrics(figures, None)


def test_the_achieved_rate_is_counted_over_the_steady_window_in_server_time():
    window = {"start": 1.0, "end": 6.0, "seconds": 5.0, "requests": 40}
    r = result(window=window, time_scale=2.0, steady_output_throughput=500.0)
    assert achieved_rps(r) == 4.0  # 40 requests in 5 wall seconds = 10 server seconds
    assert level_of(4.0, r, JUDGED).output_throughput == 500.0


def test_an_slo_in_server_time_is_judged_on_wall_clock_latencies():
    assert to_wall_time(SLO(ttft_p99_ms=2000.0, itl_p99_ms=50.0), 4.0) == SLO(500.0, 12.5)
    assert to_wall_time(None, 4.0) is None
    same = SLO(tpot_ms=30.0)
    assert to_wall_time(same, 1.0) is same


def test_a_level_stopped_on_a_certain_miss_never_holds_and_says_so():
    """Its shortened run may read within the SLOs (the drain after the last arrival is
    cut from its window); the miss was certain for the whole run, so it does not hold."""
    stopped = dataclasses.replace(result(), stop_reason="missed")
    level = level_of(3.0, stopped, JUDGED)
    assert not level.held and level.stopped_early is True
    assert level.point(JUDGED).value >= 1.0  # the capacity fit counts it as missed too
    assert level_of(3.0, result(), JUDGED).held
    assert level_of(3.0, result(), JUDGED).stopped_early is None


def test_every_level_but_the_reference_rate_stops_on_a_certain_miss():
    plan = LadderPlan(start_rate=8.0)
    assert not stops_on_miss(plan, 8.0)  # its p99s are the study's reference_* figures
    assert stops_on_miss(plan, 16.0) and stops_on_miss(LadderPlan(), 8.0)
    assert not stops_on_miss(LadderPlan(stop_on_miss=False), 16.0)

"""The steady window of a closed-loop run and its batch-means intervals, on scripted request
outputs (exact binary fractions: no clock, no socket)."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.loadgen.client import RequestOutput
from tuner.loadgen.window import (MIN_BATCHES, _interval, lag1, latency_trend, steady_figures,
                                  steady_requests, steady_window)

pytestmark = pytest.mark.unit

STEP = 0.125


def request(start: float, gaps: int = 7, step: float = STEP) -> RequestOutput:
    """A request of gaps + 1 tokens: the first after ``step``, then one every ``step``."""
    return RequestOutput(success=True, start_time=start, ttft=step, itl=[step] * gaps,
                         itl_per_token=[step] * gaps, latency=step * (gaps + 1),
                         output_tokens=gaps + 1, chunks=gaps + 1, arrivals=gaps + 1)


def closed_loop(clients: int, per_client: int, slow_after: float | None = None):
    """Each client sends its next request as its last one ends; after ``slow_after`` the
    server's tokens come twice as slowly."""
    outs = []
    for _ in range(clients):
        t = 0.0
        for _ in range(per_client):
            step = STEP * 2 if slow_after is not None and t >= slow_after else STEP
            outs.append(request(t, step=step))
            t += step * 8
    return outs


def test_the_window_runs_from_the_first_completion_to_the_last_start():
    outs = closed_loop(4, 20)
    outs.append(request(19.0, gaps=39))  # a long last request: the drain is left out
    w = steady_window(outs)
    assert (w.start, w.end) == (1.0, 19.0)
    assert w.batches == 17  # whole batches of one mean latency (here 80 s / 77 requests)
    assert w.requests == 4 * 19  # those that ended inside it, at 1, 2, ... 19 s


def test_a_steady_run_has_a_tight_interval_and_meets_its_targets():
    w = steady_window(closed_loop(4, 20))
    assert w.output_throughput.value == 32.0  # 4 clients x 8 tokens a second
    assert w.output_throughput.half_width == 0.0 and w.p99_itl_ms.value == 125.0
    assert w.within(0.02, 0.10)


def test_a_run_that_changes_half_way_has_a_wide_interval():
    w = steady_window(closed_loop(4, 15, slow_after=8.0))
    assert w.output_throughput.rel > 0.10 and w.p99_itl_ms.rel > 0.10
    assert not w.within(0.02, 0.10)
    # A repeat run has its own error beside this one's: its interval is sqrt 2 wider, and
    # wider again here, where one slow spell makes the batches correlated.
    iv = w.output_throughput
    assert iv.lag1 > 0.5
    factor = (2 * (1 + iv.lag1) / (1 - iv.lag1)) ** 0.5
    assert iv.repeat_half_width == pytest.approx(iv.half_width * factor)
    assert iv.repeat_rel == pytest.approx(iv.rel * factor)


def test_uncorrelated_batches_widen_a_repeat_run_by_sqrt_2_only():
    assert lag1(np.array([1.0, 3.0, 1.0, 3.0, 1.0, 3.0])) < 0  # alternating: taken as 0
    assert lag1(np.array([2.0, 2.0, 2.0, 2.0])) == 0.0
    assert lag1(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])) == pytest.approx(0.625)
    iv = _interval(2.0, [1.0, 3.0, 1.0, 3.0, 1.0, 3.0])
    assert iv.repeat_half_width == pytest.approx(iv.half_width * 2 ** 0.5)


def test_too_short_a_window_gives_no_interval():
    w = steady_window(closed_loop(2, MIN_BATCHES))
    assert w is not None and w.batches < MIN_BATCHES
    assert w.output_throughput is None and not w.within(1.0, 1.0)
    assert steady_window([request(0.0)]) is None


def test_the_per_token_itl_can_be_the_intervals_itl():
    outs = closed_loop(4, 20)
    for o in outs:  # two tokens a message: vLLM's ITL per message doubles, per token not
        o.itl = [2 * STEP] * 3
    assert steady_window(outs, "itl").p99_itl_ms.value == 250.0
    assert steady_window(outs, "itl_per_token").p99_itl_ms.value == 125.0


def queue(arrival_gap: float, service: float, n: int = 64) -> list[RequestOutput]:
    """A FIFO server taking ``service`` s a request, fed one every ``arrival_gap`` s."""
    outs, free = [], 0.0
    for k in range(n):
        start = k * arrival_gap
        free = max(free, start) + service
        outs.append(RequestOutput(success=True, start_time=start, ttft=free - start,
                                  latency=free - start))
    return outs


@pytest.mark.parametrize(("gap", "service", "trend"), [(1.0, 0.5, 0.0), (1.0, 1.0, 0.0),
                                                        (1.0, 1.25, 0.25), (0.5, 1.0, 1.0)])
def test_the_latency_trend_reads_how_far_arrivals_outpace_a_queue(gap, service, trend):
    outs = queue(gap, service)  # a wait that grows by service / gap - 1 s a second, or not
    assert latency_trend(outs) == pytest.approx(trend)


def test_the_latency_trend_counts_only_successes():
    outs = queue(1.0, 1.25)
    failed = RequestOutput(success=False, start_time=10.5, latency=1000.0)
    assert latency_trend(outs + [failed]) == pytest.approx(0.25)
    assert latency_trend(outs[:2]) is None


def test_steady_requests_start_in_the_window_a_median_latency_before_its_end():
    outs = queue(1.0, 0.5)  # every latency 0.5 s
    failed = RequestOutput(success=False, start_time=10.0)
    steady = steady_requests(outs + [failed], 2.0, 20.0)
    assert [o.start_time for o in steady] == [float(t) for t in range(2, 20)] + [10.0]
    assert steady_window(queue(1.0, 1.25)).latency_trend == pytest.approx(0.25)


def test_steady_figures_leave_out_the_ramp_and_the_drain():
    # steady requests: the first token after 0.125 s, then 7 gaps of 0.125 s; a slow first
    # token in the ramp and a slow gap in the drain would otherwise set the p99s
    outs = [request(float(k)) for k in range(2, 40)]
    ramp = RequestOutput(success=True, start_time=0.0, ttft=2.0, itl=[0.125] * 7,
                         itl_per_token=[0.125] * 7, latency=2.875, output_tokens=8)
    drain = RequestOutput(success=True, start_time=39.5, ttft=0.125, itl=[0.125] * 6 + [4.0],
                          itl_per_token=[0.125] * 6 + [4.0], latency=4.875, output_tokens=8)
    figures = steady_figures([ramp, *outs, drain], 1.0, 39.5)
    assert figures["p99_ttft_ms"] == 125.0 and figures["p99_itl_ms"] == 125.0
    assert figures["p99_e2el_ms"] == 1000.0 and figures["p99_tpot_ms"] == 125.0
    assert steady_figures([], 1.0, 39.5) == {}

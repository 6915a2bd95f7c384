"""A paced run's certain SLO miss (tuner.loadgen.miss): the percentile bound against numpy,
and the watch's counting on hand-made requests."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.loadgen.client import RequestOutput
from tuner.loadgen.miss import FAILED, ITL, TTFT, MissLimits, MissWatch, must_exceed


@pytest.mark.parametrize("seed", range(20))
def test_a_certain_miss_exceeds_numpys_p99_for_every_shorter_run(seed):
    """k samples over the limit, as few as ``must_exceed`` allows, and every other sample
    just under it: numpy's p99 exceeds the limit for any final count up to n_max."""
    rng = np.random.default_rng(seed)
    n_max = int(rng.integers(1, 5000))
    k = int(np.ceil(0.01 * n_max + 2))
    assert must_exceed(k, n_max) and not must_exceed(k - 1, n_max)
    for n in {k, (k + n_max) // 2, n_max}:
        if n < k:
            continue
        samples = np.concatenate([np.full(n - k, 1.0), 1.0 + rng.random(k) + 1e-9])
        assert np.percentile(samples, 99) > 1.0, (n_max, n, k)


def test_the_bound_is_close_to_what_a_run_can_still_meet():
    """With 9 of 1,000 samples over the limit (the rest at it) a run meets it, and the
    bound asks for 12: a watch stops a level at most 3 samples later than it could."""
    n_max = 1000
    samples = np.concatenate([np.full(n_max - 9, 1.0), np.full(9, 2.0)])
    assert np.percentile(samples, 99) <= 1.0
    assert not must_exceed(9, n_max) and must_exceed(12, n_max)


def _out(start: float, ttft: float = 0.0, itl=(), latency: float = 0.0,
         success: bool = False) -> RequestOutput:
    return RequestOutput(start_time=start, ttft=ttft, itl=list(itl), latency=latency,
                         success=success)


def test_nothing_is_certain_before_the_first_completion():
    watch = MissWatch(MissLimits(ttft_s=0.1, itl_s=0.01, requests=10, gaps=100))
    waiting = [_out(0.0) for _ in range(10)]
    assert watch.check(waiting, [], now=100.0) is None
    assert watch.start is None


def test_without_a_bound_on_its_gaps_a_run_is_not_watched_for_itl():
    """A run whose gaps cannot be bounded (no request count) never stops on its ITL."""
    watch = MissWatch(MissLimits(ttft_s=None, itl_s=0.01, requests=10))
    done = _out(0.0, ttft=0.01, itl=[1.0] * 50, latency=50.0, success=True)
    assert watch.check([done], [done], now=60.0) is None and watch.over_itl == 0


def test_a_failed_request_is_a_certain_miss():
    watch = MissWatch(MissLimits(ttft_s=None, itl_s=0.05, requests=100, gaps=1000))
    bad = _out(0.0)
    bad.reason = "http_500"
    assert watch.check([bad], [bad], now=1.0) == FAILED


def test_ttft_counts_waiting_requests_but_not_those_sent_before_the_window():
    """Two requests over the TTFT limit make the miss certain for a run of at most 10
    (0.01 x 10 + 2 = 2.1: three needed); one sent before the first completion does not
    count, one still waiting past the limit does."""
    limits = MissLimits(ttft_s=0.5, itl_s=None, requests=10)
    watch = MissWatch(limits)
    first = _out(0.0, ttft=0.1, latency=1.0, success=True)        # completes at 1.0
    early = _out(0.5, ttft=2.0)                                    # before the window
    slow = [_out(1.0 + i, ttft=0.9) for i in range(2)]             # over, in the window
    sent = [first, early, *slow]
    assert watch.check(sent, [first], now=3.0) is None
    assert watch.over_ttft == 2
    waiting = _out(3.0)  # no token yet
    sent.append(waiting)
    assert watch.check(sent, [first], now=3.4) is None   # waited 0.4 s: not yet over
    assert watch.check(sent, [first], now=3.6) == TTFT   # waited 0.6 s: over for good
    assert watch.over_ttft == 3


def test_itl_counts_each_gap_once_and_only_gaps_ending_in_the_window():
    limits = MissLimits(ttft_s=None, itl_s=0.05, requests=10, gaps=200)  # needs 4 over
    watch = MissWatch(limits)
    first = _out(0.0, ttft=0.1, itl=[0.1, 0.1], latency=0.3, success=True)  # ends at 0.3
    # a stream whose first two slow gaps end before 0.3, the window's start
    streaming = _out(0.0, ttft=0.05, itl=[0.1, 0.1])
    sent = [first, streaming]
    assert watch.check(sent, [first], now=0.4) is None
    assert watch.over_itl == 1  # first's second gap ends at 0.3; streaming's end at 0.15, 0.25
    streaming.itl.extend([0.2, 0.01, 0.2])
    assert watch.check(sent, [first], now=1.0) is None
    assert watch.over_itl == 3
    assert watch.check(sent, [first], now=1.1) is None  # nothing new: nothing counted twice
    streaming.itl.append(0.3)
    assert watch.check(sent, [first], now=1.5) == ITL

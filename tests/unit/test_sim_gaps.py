"""The step and gap model: how a step's kind sets its time and its gaps' tail."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tuner.sim.config import resolve
from tuner.sim.gaps import GapShares, percentile
from tuner.sim.profiles import engine_constants, load_gpu
from tuner.sim.shape import LLAMA3_8B
from tuner.sim.steptime import coefficients, launch_bound, step_seconds

pytestmark = pytest.mark.unit
H200 = load_gpu("h200")

# 1,000 gaps of one 10 ms step, the next step also 10 ms
VALUES, COUNTS, NEXT = np.full(1000, 0.010), np.ones(1000), np.full(1000, 0.010)
NO, YES = np.zeros(1000, dtype=bool), np.ones(1000, dtype=bool)


def test_without_shares_a_gap_is_its_step():
    assert percentile(VALUES, COUNTS, NEXT, NO, NO, 99, GapShares()) == pytest.approx(10.0)


def test_doubled_gaps_only_in_steps_that_complete_two_prompts():
    shares = GapShares(doubled_multi_prefill=0.02)
    assert percentile(VALUES, COUNTS, NEXT, NO, YES, 99, shares) == pytest.approx(20.0)
    assert percentile(VALUES, COUNTS, NEXT, NO, NO, 99, shares) == pytest.approx(10.0)
    half = np.arange(1000) < 400  # 40 % of the gaps: 0.8 % doubled, under the 1 % of p99
    assert percentile(VALUES, COUNTS, NEXT, NO, half, 99, shares) == pytest.approx(10.0)


def test_late_gaps_spread_over_the_next_step():
    """A share of 2 %, late by a uniform fraction of the next step: the top 1 % of all gaps
    is the later half of them, so p99 is 1.5 steps; p90 stays one step."""
    shares = GapShares(late=0.02, late_launch_bound=0.2)
    p99 = percentile(VALUES, COUNTS, NEXT, NO, NO, 99, shares)
    assert p99 == pytest.approx(15.0, abs=0.4)
    assert percentile(VALUES, COUNTS, NEXT, NO, NO, 90, shares) == pytest.approx(10.0)
    # launch-bound (eager) steps take their own, larger share: p90 1.5 steps
    assert percentile(VALUES, COUNTS, NEXT, YES, NO, 90, shares) == pytest.approx(15.0, abs=0.4)


def test_counts_weigh_the_gaps():
    values = np.array([0.010, 0.050])
    assert percentile(values, np.array([98, 2]), values, NO[:2], NO[:2], 99,
                      GapShares()) == pytest.approx(50.0)
    assert percentile(values, np.array([995, 5]), values, NO[:2], NO[:2], 99,
                      GapShares()) == pytest.approx(10.0)


def _coef(**flags):
    return coefficients(resolve(flags, LLAMA3_8B, H200), LLAMA3_8B, H200, engine_constants())


def test_eager_dispatch_overlaps_the_gpu():
    """Eager: a step costs max(GPU, dispatch), so doubling a small step's tokens costs far
    less than doubling its GPU time, and a large step pays no dispatch at all."""
    c = _coef(enforce_eager=True)
    k = engine_constants()
    fixed = k.step_overhead_ms * 1e-3
    small = step_seconds(c, 64, 64, 64, 64 * 1000.0, 64 * 1000)
    assert launch_bound(c, 64, 64, 64, 64 * 1000.0, 64 * 1000)
    assert small - fixed - 64 * c.per_seq_s == pytest.approx(c.launch_eager_s)
    big = step_seconds(c, 8192, 8, 8, 8192 * 512.0, 0)
    assert not launch_bound(c, 8192, 8, 8, 8192 * 512.0, 0)
    graphs = step_seconds(_coef(), 8192, 8, 8, 8192 * 512.0, 0)
    assert big < graphs  # the compiled model's launches add to its GPU time


def test_steps_with_prefill_replay_piecewise_graphs():
    """Up to the capture size, only decode-only steps replay one full graph; a step with
    prefill tokens (more tokens than sequences) pays the piecewise cost per layer."""
    cfg = resolve({}, LLAMA3_8B, H200)
    cheap, dear = (coefficients(cfg, LLAMA3_8B, H200, dataclasses.replace(
        engine_constants(), piecewise_launch_us_per_layer=us)) for us in (4.0, 50.0))
    decode = (256, 256, 256, 256 * 1000.0, 256 * 1000)
    mixed = (256, 200, 200, 200 * 1000.0 + 56 * 28.0, 200 * 1000)
    assert step_seconds(dear, *decode) == step_seconds(cheap, *decode)
    extra = step_seconds(dear, *mixed) - step_seconds(cheap, *mixed)
    assert extra == pytest.approx(LLAMA3_8B.num_hidden_layers * 46e-6)
    above = (1024, 200, 200, 200 * 1000.0 + 824 * 400.0, 200 * 1000)  # above the capture size
    assert step_seconds(dear, *above) == step_seconds(cheap, *above)

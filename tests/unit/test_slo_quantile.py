"""A percentile with its confidence interval (tuner.slo.quantile), on samples whose true
percentile is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tuner.slo.quantile import MIN_SAMPLES, TAIL_FROM, Estimate, percentile_estimate

pytestmark = pytest.mark.unit

samples = st.lists(st.floats(min_value=0.0, max_value=1e6, allow_nan=False),
                   min_size=MIN_SAMPLES, max_size=400)
percentiles = st.floats(min_value=1.0, max_value=99.9)


@settings(max_examples=150, deadline=None)
@given(samples, percentiles)
def test_the_value_is_numpys_percentile_and_lies_within_its_interval(xs, q):
    est = percentile_estimate(xs, q)
    assert est.value == pytest.approx(float(np.percentile(xs, q)), rel=1e-12, abs=1e-12)
    assert est.lower <= est.value <= est.upper
    assert est.n == len(xs) and 1 <= est.n_eff <= est.n
    assert est.method in ("order", "tail")


@settings(max_examples=150, deadline=None)
@given(samples, percentiles)
def test_an_unbounded_upper_end_only_where_the_tail_model_has_nothing_to_fit(xs, q):
    """Order statistics always bound it by a sample; the tail model leaves it open only
    for a percentile at or below its threshold, or with no sample above the threshold."""
    est = percentile_estimate(xs, q)
    if est.method == "order":
        assert est.lower in xs and est.upper in xs
    if math.isinf(est.upper):
        x = np.asarray(xs)
        assert est.method == "tail"
        assert q <= TAIL_FROM or not (x > np.percentile(x, TAIL_FROM)).any()


def test_the_stated_unbounded_cases_do_occur():
    at_threshold = percentile_estimate(np.arange(1.0, 11.0), TAIL_FROM)  # too few for order
    assert at_threshold.method == "tail" and at_threshold.upper == math.inf
    tied_top = percentile_estimate([1.0] * 5 + [2.0] * 15, 99.0)  # nothing above the p90
    assert tied_top.method == "tail" and tied_top.upper == math.inf
    assert tied_top.to_json()["upper"] is None
    assert percentile_estimate(np.arange(1.0, 21.0), 99.0).upper < math.inf


def test_fewer_than_the_minimum_of_finite_samples_gives_no_estimate():
    assert percentile_estimate([1.0] * (MIN_SAMPLES - 1)) is None
    assert percentile_estimate([1.0] * (MIN_SAMPLES - 1) + [math.nan, math.inf]) is None
    assert percentile_estimate([]) is None
    est = percentile_estimate(list(range(MIN_SAMPLES)) + [math.nan])
    assert isinstance(est, Estimate) and est.n == MIN_SAMPLES


def test_a_large_iid_sample_uses_order_statistics_and_counts_nearly_every_sample():
    x = np.random.default_rng(7).exponential(size=2000)
    est = percentile_estimate(x, 99.0)
    assert est.method == "order" and est.n_eff > 0.9 * est.n
    assert est.to_json() == {"value": est.value, "lower": est.lower, "upper": est.upper,
                             "n": 2000, "n_eff": round(est.n_eff, 1), "method": "order"}


DRAWS = 200


def _coverage(draw, true_p99: float, n: int, seed: int, draws: int = DRAWS) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(draws):
        est = percentile_estimate(draw(rng, n), 99.0, 0.95)
        hits += est.lower <= true_p99 <= est.upper
    return hits / draws


EXPONENTIAL = (lambda rng, n: rng.exponential(1.0, n), stats.expon.ppf(0.99))
LOGNORMAL = (lambda rng, n: rng.lognormal(0.0, 0.5, n), stats.lognorm.ppf(0.99, 0.5))
HEAVY_LOGNORMAL = (lambda rng, n: rng.lognormal(0.0, 1.0, n), stats.lognorm.ppf(0.99, 1.0))


@pytest.mark.parametrize("n", [150, 400, 2000])
@pytest.mark.parametrize(("dist", "name"), [(EXPONENTIAL, "exponential"),
                                            (LOGNORMAL, "lognormal(0.5)")])
def test_the_95_percent_interval_covers_the_true_p99_of_iid_samples(dist, name, n):
    """n=150 is below what order statistics need for a p99's upper end: the tail model's
    interval is the one judged there; 400 and 2000 are mostly order statistics."""
    draw, true_p99 = dist
    assert _coverage(draw, true_p99, n, seed=n) >= 0.88, name


@pytest.mark.xfail(strict=True, reason="the exponential tail ignores the threshold's own "
                   "variance and under-fits a heavier (lognormal sigma=1) tail: about 0.85")
def test_the_tail_interval_covers_a_heavier_lognormal_p99_at_150_samples():
    draw, true_p99 = HEAVY_LOGNORMAL
    assert _coverage(draw, true_p99, 150, seed=150, draws=600) >= 0.88


def test_clustered_exceedances_count_about_once_per_cluster():
    """Each value repeated 20 times in a row (a burst that queues together) is worth about
    its distinct values; the same values shuffled are worth nearly all of them."""
    rng = np.random.default_rng(3)
    clustered = np.repeat(rng.exponential(size=100), 20)
    shuffled = rng.permutation(clustered)
    c, s = percentile_estimate(clustered, 99.0), percentile_estimate(shuffled, 99.0)
    assert c.value == s.value and c.n == s.n == 2000
    assert c.n_eff < 0.05 * c.n and s.n_eff > 0.8 * s.n
    assert (c.upper - c.lower) > 1.5 * (s.upper - s.lower)

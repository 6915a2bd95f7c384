"""tuner.slo.dist against scipy's own functions (scipy is a test dependency only)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.optimize import isotonic_regression

from tuner.slo import dist

pytestmark = pytest.mark.unit


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=30),
       st.lists(st.floats(0.1, 10.0), min_size=30, max_size=30))
def test_isotonic_is_scipys(values, weights):
    w = weights[:len(values)]
    assert dist.isotonic(values, w) == pytest.approx(
        isotonic_regression(values, weights=w, increasing=True).x, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("n", [1, 10, 122, 300, 5000, 40000])
@pytest.mark.parametrize("p", [0.5, 0.9, 0.99])
@pytest.mark.parametrize("q", [0.025, 0.3, 0.975])
def test_binomial_quantiles_are_scipys(n, p, q):
    assert dist.binom_ppf(q, n, p) == int(stats.binom.ppf(q, n, p))


@pytest.mark.parametrize("df", [0.5, 1.3, 2.0, 7.3, 20.0, 200.0, 2000.0])
@pytest.mark.parametrize("q", [0.025, 0.5, 0.975])
def test_chi_square_quantiles_are_scipys(df, q):
    assert dist.chi2_ppf(q, df) == pytest.approx(stats.chi2.ppf(q, df), rel=1e-8)


def test_normal_quantile_is_scipys():
    for q in (0.025, 0.5, 0.975):
        assert dist.norm_ppf(q) == pytest.approx(stats.norm.ppf(q), rel=1e-9)

"""The SLO's one verdict on a level (tuner.slo.verdict): margins, held, certain."""

from __future__ import annotations

import math

import pytest

from tuner.slo import BACKLOG, FIGURES, Slo, backlog_margin

pytestmark = pytest.mark.unit

ALL = Slo.of({"p99_ttft_ms": 500.0, "p99_itl_ms": 50.0, "p99_tpot_ms": 30.0,
              "p99_e2el_ms": 8000.0}, backlog_tolerance=None)
WITHIN = {"p99_ttft_ms": 400.0, "p99_itl_ms": 45.0, "p99_tpot_ms": 15.0, "p99_e2el_ms": 4000.0}


def margin(verdict, figure):
    return next(m for m in verdict.margins if m.figure == figure)


def test_margins_are_each_figure_over_its_limit_sorted_worst_first():
    v = ALL.verdict(WITHIN)
    assert [m.figure for m in v.margins] == ["p99_itl_ms", "p99_ttft_ms", "p99_tpot_ms",
                                             "p99_e2el_ms"]
    assert [m.value for m in v.margins] == [0.9, 0.8, 0.5, 0.5]
    assert v.worst.figure == "p99_itl_ms" and v.held
    # without intervals every margin is exact: the verdict is certain either way
    assert all(m.lower == m.value == m.upper for m in v.margins) and v.certain


@pytest.mark.parametrize(("figure", "over"), [("p99_tpot_ms", 31.0), ("p99_e2el_ms", 8001.0),
                                              ("p99_ttft_ms", 501.0), ("p99_itl_ms", 50.5)])
def test_every_limited_figure_is_judged_tpot_and_e2el_too(figure, over):
    v = ALL.verdict({**WITHIN, figure: over})
    assert not v.held and v.worst.figure == figure and v.worst.value > 1.0


def test_a_figure_on_its_limit_holds():
    assert ALL.verdict({**WITHIN, "p99_itl_ms": 50.0}).held


def test_a_limited_figure_the_level_lacks_is_missed():
    for absent in (None, math.nan, math.inf):
        v = ALL.verdict({**WITHIN, "p99_e2el_ms": absent})
        assert not v.held and v.worst.figure == "p99_e2el_ms"
        assert v.worst.value == v.worst.lower == v.worst.upper == math.inf
    without = {f: x for f, x in WITHIN.items() if f != "p99_tpot_ms"}
    assert not ALL.verdict(without).held


def test_unlimited_figures_are_not_judged():
    slo = Slo.of({"p99_ttft_ms": 500.0, "p99_itl_ms": None}, backlog_tolerance=None)
    v = slo.verdict({"p99_ttft_ms": 100.0, "p99_itl_ms": 1e9, "p99_e2el_ms": None})
    assert [m.figure for m in v.margins] == ["p99_ttft_ms"] and v.held
    assert slo.limit("p99_itl_ms") is None and slo.limit("p99_ttft_ms") == 500.0


def test_an_slo_that_judges_nothing_never_holds():
    assert Slo(backlog_tolerance=None).empty
    assert not Slo(backlog_tolerance=None).verdict(WITHIN).held
    assert Slo(backlog_tolerance=None).verdict(WITHIN).worst is None


def test_intervals_are_scaled_by_the_limit_and_an_open_end_is_unbounded():
    v = ALL.verdict(WITHIN, {"p99_itl_ms": (40.0, 48.0), "p99_ttft_ms": (None, None),
                             "p99_tpot_ms": (None, 20.0)})
    itl, ttft, tpot = (margin(v, f) for f in ("p99_itl_ms", "p99_ttft_ms", "p99_tpot_ms"))
    assert (itl.lower, itl.value, itl.upper) == (0.8, 0.9, 0.96)
    assert (ttft.lower, ttft.upper) == (0.0, math.inf)
    assert (tpot.lower, tpot.upper) == (0.0, 20.0 / 30.0)
    assert margin(v, "p99_e2el_ms").lower == margin(v, "p99_e2el_ms").upper == 0.5
    assert itl.to_json() == {"margin": 0.9, "lower": 0.8, "upper": 0.96}
    assert ttft.to_json()["upper"] is None


def test_an_interval_never_excludes_its_own_point():
    v = ALL.verdict(WITHIN, {"p99_itl_ms": (46.0, 44.0)})  # ends on the wrong side of 45
    itl = margin(v, "p99_itl_ms")
    assert itl.lower <= itl.value <= itl.upper


def test_certain_when_every_interval_is_below_1_or_one_is_wholly_above():
    sure_held = ALL.verdict(WITHIN, {"p99_itl_ms": (40.0, 49.0)})
    assert sure_held.held and sure_held.certain
    at_limit = ALL.verdict(WITHIN, {"p99_itl_ms": (40.0, 55.0)})  # held, but may not
    assert at_limit.held and not at_limit.certain
    assert not margin(at_limit, "p99_itl_ms").certain
    sure_miss = ALL.verdict({**WITHIN, "p99_itl_ms": 60.0}, {"p99_itl_ms": (52.0, 70.0)})
    assert not sure_miss.held and sure_miss.certain
    maybe_miss = ALL.verdict({**WITHIN, "p99_itl_ms": 60.0}, {"p99_itl_ms": (48.0, 70.0)})
    assert not maybe_miss.held and not maybe_miss.certain


def test_the_backlog_margin_crosses_1_exactly_at_the_tolerance():
    assert backlog_margin(0.05, None, 0.05).value == 1.0
    assert backlog_margin(0.05, None, 0.05).met
    assert not backlog_margin(0.0501, None, 0.05).met
    assert backlog_margin(-0.02, None, 0.05).value == pytest.approx(0.98 / 1.05)
    slo = Slo.of({"p99_itl_ms": 50.0}, backlog_tolerance=0.05)
    assert slo.verdict(WITHIN, trend=0.05).held
    grows = slo.verdict(WITHIN, trend=0.2)
    assert not grows.held and grows.worst.figure == BACKLOG
    assert slo.verdict(WITHIN, trend=None).held  # too few requests to tell: not judged
    untold = Slo.of({"p99_itl_ms": 50.0}, backlog_tolerance=None)
    assert untold.verdict(WITHIN, trend=0.2).held


def test_the_backlog_interval_is_its_slope_error_over_1_plus_tolerance():
    m = backlog_margin(0.05, 0.01, 0.05)
    assert m.value == 1.0 and m.lower < 1.0 < m.upper and not m.certain
    assert m.upper - m.value == pytest.approx(m.value - m.lower)
    assert m.upper - m.value == pytest.approx(1.96 * 0.01 / 1.05, rel=0.01)
    assert backlog_margin(0.5, 0.01, 0.05).certain  # far past: surely missed
    assert backlog_margin(0.05, math.inf, 0.05).lower == 1.0  # an unknown error: exact


@pytest.mark.parametrize("limits", [{"p99_ttft_ms": 0.0}, {"p99_ttft_ms": -5.0},
                                    {"p99_itl_ms": math.inf}, {"p99_itl_ms": math.nan}])
def test_a_limit_that_is_not_a_positive_number_is_refused(limits):
    with pytest.raises(ValueError, match="positive"):
        Slo.of(limits)


def test_a_figure_an_slo_cannot_limit_is_refused():
    with pytest.raises(ValueError, match="p50_ttft_ms"):
        Slo((("p50_ttft_ms", 100.0),))


def test_of_keeps_the_reporting_order_and_drops_none():
    slo = Slo.of({"p99_e2el_ms": 1.0, "p99_ttft_ms": 2.0, "p99_tpot_ms": None})
    assert slo.limits == (("p99_ttft_ms", 2.0), ("p99_e2el_ms", 1.0))
    assert set(dict(ALL.limits)) == set(FIGURES)

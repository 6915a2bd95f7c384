"""Confirmation runs in the results: a gain inside the spread of repeated runs is shown as
within noise (pure: typed records, no storage)."""

from __future__ import annotations

import json

import pytest

from tuner.results.gains import format_gains, gains, within_noise
from tuner.runner.confirm import medians, spread
from tuner.study.spec import Objective
from tuner.trials import Spread, TrialRecord

pytestmark = pytest.mark.unit

GOALS = [Objective(metric="output_throughput", direction="maximize"),
         Objective(metric="p99_itl_ms", direction="minimize")]


def rec(tput: float, itl: float, runs: list[tuple[float, float]] | None = None) -> TrialRecord:
    s = spread([{"output_throughput": a, "p99_itl_ms": b} for a, b in runs or []],
               [g.metric for g in GOALS])
    return TrialRecord(metrics={"output_throughput": tput, "p99_itl_ms": itl}, spread=s)


def test_spread_is_the_range_over_the_runs_and_medians_replace_the_objectives():
    runs = [{"output_throughput": 100.0, "p99_itl_ms": 30.0, "completed": 5},
            {"output_throughput": 104.0, "p99_itl_ms": 33.0},
            {"output_throughput": 98.0, "p99_itl_ms": 36.0}]
    s = spread(runs, ["output_throughput", "p99_itl_ms"])
    assert s["output_throughput"] == Spread(3, 100.0, 98.0, 104.0)
    assert s["output_throughput"].rel == pytest.approx(0.06)
    assert medians(runs[0], runs, ["output_throughput", "p99_itl_ms"]) == {
        "output_throughput": 100.0, "p99_itl_ms": 33.0, "completed": 5}


def test_a_gain_inside_either_spread_is_within_noise():
    default = rec(100.0, 40.0, [(97.0, 40.0), (100.0, 41.0), (103.0, 39.0)])  # 6 %, 5 %
    small = rec(104.0, 30.0)  # +4 % throughput: inside the default's 6 %; -25 % ITL: not
    g = gains(small, default, GOALS)
    noise = within_noise(small, default, g)
    assert noise == {"output_throughput": True, "p99_itl_ms": False}
    assert format_gains(g, noise) == "+4.0% (within noise) / +25.0%"
    unrepeated = rec(100.0, 40.0)
    assert within_noise(small, unrepeated, gains(small, unrepeated, GOALS)) == {
        "output_throughput": False, "p99_itl_ms": False}


def test_the_spread_survives_the_stored_record():
    r = rec(100.0, 40.0, [(97.0, 40.0), (103.0, 39.0)])
    stored = TrialRecord.from_user_attrs(json.loads(json.dumps(r.to_user_attrs())))
    assert stored.spread == r.spread and stored.spread["output_throughput"].n == 2


def test_the_default_gets_its_own_count_a_slo_miss_and_a_dominated_run_get_none():
    from tuner.runner.confirm import runs_to_add

    front = [rec(100.0, 40.0), rec(80.0, 20.0)]
    met, missed = {"slo:p99_ttft_ms": -1.0}, {"slo:p99_ttft_ms": 250.0}

    def runs(first, violations=met, default=False, confirm_default=None):
        return runs_to_add(first, violations, default, 1, confirm_default, front, GOALS)

    assert runs((90.0, 30.0)) == 1  # between the two front points: on the front
    assert runs((110.0, 50.0)) == 1  # a new end of the front
    assert runs((90.0, 45.0)) == 0  # the (100, 40) point dominates it
    assert runs((90.0, 30.0), missed) == 0  # cannot join the front under the SLOs
    assert runs((90.0, 45.0), default=True) == 1  # the default: always, confirm by default
    assert runs((90.0, 45.0), missed, default=True, confirm_default=2) == 2
    assert runs((90.0, 30.0), confirm_default=2) == 1  # confirm_default is the default's only

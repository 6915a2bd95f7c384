"""Confirmation runs in the results: a gain inside the spread of repeated runs is shown as
within noise (pure: typed records, no storage)."""

from __future__ import annotations

import json

import pytest

from tuner.results.gains import format_gains, gains, within_noise
from tuner.runner.confirm import medians, spread
from tuner.spec.study import Objective
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


# The H200's trial 8 (results/h200/round2): a first run on the fresh server, one confirmation.
FIRST = {"output_throughput": 3879.6, "p99_itl_ms": 154.0, "median_ttft_ms": 1886.3,
         "p99_ttft_ms": 6606.4, "median_itl_ms": 23.6, "mean_ttft_ms": 2100.0,
         "mean_itl_ms": 30.0, "completed": 1800, "median_e2el_ms": 5000.0}
SECOND = {**FIRST, "p99_itl_ms": 103.7, "median_ttft_ms": 1000.0, "p99_ttft_ms": 6300.0}


def confirmed(first: dict, second: dict, kept: tuple[str, ...] | None = None) -> TrialRecord:
    """A trial of two runs as the runner tells it; ``kept``: the keys an older tuner kept."""
    from tuner.runner.confirm import repetition

    names = [g.metric for g in GOALS]
    runs = [repetition(m, names, None) for m in (first, second)]
    if kept is not None:
        runs = [{**r, "metrics": {k: v for k, v in r["metrics"].items() if k in kept}}
                for r in runs]
    values = [r["metrics"] for r in runs]
    stored = TrialRecord(metrics=medians(first, values, names), repeats=tuple(runs))
    return TrialRecord.from_user_attrs(json.loads(json.dumps(stored.to_user_attrs())))


def test_each_run_keeps_the_figures_a_cross_check_compares():
    r = confirmed(FIRST, SECOND)
    for key in ("median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "mean_ttft_ms",
                "mean_itl_ms"):
        assert [run.metrics[key] for run in r.repeats] == [FIRST[key], SECOND[key]]
    assert "median_e2el_ms" not in r.repeats[0].metrics  # small: not every metric
    # Told: the objectives' medians, the first run's TTFT; the runs: each its own.
    assert r.metrics["p99_itl_ms"] == pytest.approx((154.0 + 103.7) / 2)
    assert r.metrics["median_ttft_ms"] == 1886.3
    assert r.first_run["p99_itl_ms"] == 154.0 and r.first_run["median_ttft_ms"] == 1886.3
    assert r.first_run["median_e2el_ms"] == 5000.0  # the rest of the first run's metrics
    assert r.last_run["p99_itl_ms"] == 103.7 and r.last_run["median_ttft_ms"] == 1000.0


def test_a_study_stored_before_runs_kept_ttft_still_reads():
    old_keys = ("output_throughput", "p99_itl_ms", "p99_itl_per_token_ms", "completed",
                "duration", "steady_output_throughput", "steady_p99_itl_ms")
    r = confirmed(FIRST, SECOND, kept=old_keys)
    assert r.last_run["p99_itl_ms"] == 103.7 and "median_ttft_ms" not in r.last_run
    assert r.first_run["median_ttft_ms"] == 1886.3  # the first run's, from the told metrics
    assert r.first_run["p99_itl_ms"] == 154.0


def test_a_trial_of_one_run_has_that_run_first_and_last():
    r = TrialRecord(metrics=FIRST)
    assert r.first_run == r.last_run == FIRST

"""Pareto selection, hypervolume, gains, the best pick, flag diffs and effects: pure
functions over trial records, checked against values worked out by hand."""

from __future__ import annotations

import itertools
import random

import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from tuner.results import changed_flags, flag_effects, gain_pct, limits_for, pick_best
from tuner.spec.study import Objective
from tuner.trials import record
from tuner.trials import (TrialRecord, describe_counts, dominates, from_frozen, history,
                          hypervolume, pareto_front)

GOALS = (Objective(metric="output_throughput", direction="maximize"),
         Objective(metric="p99_itl_ms", direction="minimize"))
BASE_FLAGS = {"max_num_batched_tokens": 8192, "enable_chunked_prefill": True,
              "enforce_eager": False}


def rec(number: int, thr: float | None, itl: float | None, *, slo_ok: bool = True,
        outcome: str = record.MEASURED, flags: dict | None = None, ttft: float = 500.0,
        baseline: str | None = None, state: str = "complete") -> TrialRecord:
    metrics = {} if thr is None else {"output_throughput": thr, "p99_itl_ms": itl,
                                      "p99_ttft_ms": ttft, "median_itl_ms": itl / 3}
    cons = {"starts": 0.0, "slo:p99_itl_ms": -1.0 if slo_ok else 5.0}
    return TrialRecord(number=number, state=state, outcome=outcome,
                       values=None if thr is None else (thr, itl), constraints=cons,
                       flags=flags if flags is not None else {**BASE_FLAGS,
                                                              "max_num_seqs": number},
                       metrics=metrics, baseline=baseline)


def test_dominance_respects_each_direction():
    assert dominates((10, 5), (9, 5), GOALS)
    assert dominates((10, 4), (10, 5), GOALS)
    assert not dominates((10, 5), (10, 5), GOALS)
    assert not dominates((11, 6), (10, 5), GOALS)


def test_front_keeps_only_measured_feasible_non_dominated_once():
    same = {**BASE_FLAGS, "max_num_seqs": 1}
    records = [
        rec(0, 3000, 200, baseline="default", slo_ok=False),  # misses its SLO
        rec(1, 3500, 100, flags=same),
        rec(2, 2000, 50),
        rec(3, 1900, 60),                                     # dominated by 2
        rec(4, 3500, 100, outcome=record.DUPLICATE, flags=same),
        rec(5, 3500, 100, flags=same),                        # a repeat (search.repeats)
        rec(6, None, None, outcome=record.FAILED, state="fail"),
        rec(7, 9999, 1, outcome=record.INFEASIBLE),           # told worst values, not measured
        rec(8, 4000, 300),
    ]
    front = pareto_front(records, GOALS)
    assert [r.number for r in front] == [8, 1, 2]


def test_front_is_brute_force_pareto_set():
    rng = random.Random(3)
    records = [rec(i, rng.uniform(100, 4000), rng.uniform(10, 300)) for i in range(60)]
    front = {r.number for r in pareto_front(records, GOALS)}
    for a in records:
        beaten = any(b.values[0] >= a.values[0] and b.values[1] <= a.values[1]
                     and b.values != a.values for b in records)
        assert (a.number in front) == (not beaten)


def test_hypervolume_two_and_three_dimensions_by_hand():
    # Two points dominating [0,4]x[0,4] minus overlap: rectangles 3x1 and 1x3 overlap 1x1.
    assert hypervolume([(1, 3), (3, 1)], (4, 4)) == pytest.approx(3 + 3 - 1)
    assert hypervolume([(1, 3), (3, 1), (2, 2)], (4, 4)) == pytest.approx(6)
    assert hypervolume([(5, 0)], (4, 4)) == 0.0   # not better than the reference
    assert hypervolume([(0, 0, 0)], (1, 2, 3)) == pytest.approx(6)
    # [0,1]x[0,2]x[1,3] (4) and [0,1]x[1,2]x[0,3] (3) overlap in [0,1]x[1,2]x[1,3] (2)
    assert hypervolume([(0, 0, 1), (0, 1, 0)], (1, 2, 3)) == pytest.approx(4 + 3 - 2)


def test_hypervolume_matches_grid_count():
    rng = random.Random(7)
    pts = [(rng.randint(0, 9), rng.randint(0, 9), rng.randint(0, 9)) for _ in range(6)]
    ref = (10, 10, 10)
    cells = sum(1 for c in itertools.product(range(10), repeat=3)
                if any(all(p[i] <= c[i] for i in range(3)) for p in pts))
    assert hypervolume(pts, ref) == pytest.approx(cells)


def test_hypervolume_history_uses_the_default_as_reference_and_never_falls():
    records = [rec(0, 3000, 200, baseline="default"), rec(1, 3500, 100), rec(2, 1000, 300),
               rec(3, None, None, outcome=record.FAILED, state="fail"), rec(4, 3200, 50),
               rec(5, 0, 0, state="running", outcome=None)]
    hv = history(records, GOALS, (3000, 200))
    assert [n for n, _ in hv] == [0, 1, 2, 3, 4]
    values = [v for _, v in hv]
    assert values[0] == 0 and values[1] == pytest.approx(500 * 100)
    assert values == sorted(values)
    assert values[-1] == pytest.approx(hypervolume([(-3500, 100), (-3200, 50)], (-3000, 200)))


def test_gain_is_positive_when_better_in_either_direction():
    assert gain_pct(110, 100, "maximize") == pytest.approx(10)
    assert gain_pct(80, 100, "minimize") == pytest.approx(20)
    assert gain_pct(120, 100, "minimize") == pytest.approx(-20)
    assert gain_pct(5, 0, "maximize") is None


def test_limits_take_the_tighter_bound():
    assert limits_for({"p99_itl_ms": 100}, 80, None) == {"p99_itl_ms": 80}
    assert limits_for({"p99_itl_ms": 100}, 120, 900) == {"p99_itl_ms": 100, "p99_ttft_ms": 900}


def test_best_pick_prefers_and_respects_limits():
    records = [rec(0, 3000, 200, baseline="default"), rec(1, 3500, 100), rec(2, 2000, 50),
               rec(3, 3600, 100, outcome=record.DUPLICATE), rec(4, 4000, 130, ttft=5000)]
    assert pick_best(records, GOALS, {}, "throughput").best.number == 4
    assert pick_best(records, GOALS, {"p99_ttft_ms": 3000}, "throughput").best.number == 1
    assert pick_best(records, GOALS, {}, "latency").best.number == 2
    pick = pick_best(records, GOALS, {"p99_itl_ms": 40}, "throughput")
    assert pick.best is None and pick.closest.number == 2
    assert pick.excess == {"p99_itl_ms": pytest.approx(0.25)}


def test_best_pick_on_nothing_measured():
    pick = pick_best([rec(0, None, None, outcome=record.FAILED, state="fail")], GOALS, {})
    assert pick.best is None and pick.closest is None


def test_changed_flags_against_defaults():
    defaults = {"a": 1, "b": 0.9, "c": True}
    assert changed_flags({"a": 1, "b": 0.9000000000001, "c": False, "d": 3}, defaults) == \
        {"c": False, "d": 3}


def test_flag_effects_group_booleans_and_numbers():
    records = [rec(i, 1000 + 1000 * (i % 2), 100, flags={
        "enforce_eager": bool(i % 2), "max_num_seqs": 2 ** i}) for i in range(6)]
    effects = {e.name: e for e in flag_effects(records, ["enforce_eager", "max_num_seqs"],
                                                GOALS)}
    eager = effects["enforce_eager"]
    assert [g.label for g in eager.groups] == ["false", "true"]
    assert eager.groups[0].means[0] == 1000 and eager.groups[1].means[0] == 2000
    assert eager.spread_pct[0] == pytest.approx(1000 / 1500 * 100)
    assert eager.spread_pct[1] == 0
    assert [g.n for g in effects["max_num_seqs"].groups] == [3, 3]


def test_from_frozen_reads_the_trial_record():
    t = optuna.trial.create_trial(
        state=TrialState.COMPLETE, values=[3000.0, 90.0],
        params={"max_num_seqs": 64}, distributions={"max_num_seqs": IntDistribution(8, 1024)},
        user_attrs={"outcome": "measured", "flags": {"max_num_seqs": 64},
                    "metrics": {"output_throughput": 3000.0, "p99_itl_ms": 90.0, "x": "no"},
                    "baseline": "default", "gpu_name": "NVIDIA H200",
                    "kv_cache_tokens": 1000, "command": ["vllm", "serve"],
                    "client": {"valid": False}},
        constraints={"starts": 0.0, "slo:p99_itl_ms": -10.0})
    r = from_frozen(t)
    assert r.measured and r.feasible and r.state == "complete" and r.baseline == "default"
    assert r.constraints == {"starts": 0.0, "slo:p99_itl_ms": -10.0}
    assert r.metrics == {"output_throughput": 3000.0, "p99_itl_ms": 90.0}
    assert r.command == ("vllm", "serve") and r.kv_cache_tokens == 1000
    assert r.client_valid is False
    assert describe_counts([r, rec(1, None, None, outcome=None, state="waiting")]) == \
        "2 trials: 1 measured, 1 waiting"


def test_one_objective_study():
    goal = (GOALS[0],)
    records = [rec(0, 3000, 200), rec(1, 3500, 100), rec(2, 3500, 90, flags={"x": 1})]
    assert [r.number for r in pareto_front(records, goal)] == [1, 2]  # equal values tie
    assert [v for _, v in history(records, goal, (3000,))] == [0, 500, 500]
    assert pick_best(records, goal, {}, "latency").metric == "p99_itl_ms"


def test_ruled_out_names_the_study_slo_that_leaves_nothing_under_the_users_limit():
    from tuner.results.best import ruled_out

    records = [rec(1, 1700, 24, ttft=20000.0), rec(2, 1900, 28, ttft=16000.0),
               rec(3, 1800, 20, ttft=12000.0), rec(4, 3800, 47, ttft=7000.0)]
    slo = {"p99_itl_ms": 250, "p99_ttft_ms": 10000}
    out = ruled_out(records, {"p99_itl_ms": 25}, slo)
    assert {k: [r.number for r in v] for k, v in out.items()} == {"p99_ttft_ms": [1, 3]}
    assert ruled_out(records, {"p99_itl_ms": 10}, slo) == {}  # the user's limit leaves none
    assert ruled_out(records, {"p99_itl_ms": 50}, slo)["p99_ttft_ms"][-1].number == 3

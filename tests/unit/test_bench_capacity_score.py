"""bench/capacity_score.py and capacity_truth.bisect_capacity: how the capacity benchmark
scores a study and compares two contenders seed by seed."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from capacity_score import (Trial, best_share, front_volume, gpu_seconds_to,  # noqa: E402
                            hv_share, median, paired_test, quartiles)
from capacity_truth import bisect_capacity  # noqa: E402


def test_best_share_is_the_best_true_capacity_over_the_best_known():
    ts = [Trial(2.0, 30.0, 100), Trial(0.0, None, 10), Trial(8.0, 40.0, 100)]
    assert best_share(ts, 10.0) == pytest.approx(0.8)
    assert best_share([Trial(0.0, None, 10)], 10.0) == 0.0
    assert best_share([], 10.0) == 0.0
    assert math.isnan(best_share(ts, 0.0))  # nothing holds the SLOs anywhere: no score


def test_the_front_counts_held_trials_only_and_dominated_ones_add_nothing():
    ref = (-1.0, 50.0)  # capacity floor 1 req/s, p99 ITL limit 50 ms (minimised pairs)
    a = Trial(5.0, 20.0, 1)  # (5-1) x (50-20) = 120
    dominated = Trial(4.0, 30.0, 1)
    never = Trial(0.0, 10.0, 1)  # capacity 0: on no front, however low its ITL
    assert front_volume([(-5.0, 20.0)], ref) == pytest.approx(120.0)
    assert hv_share([a, dominated, never], 120.0, ref) == pytest.approx(1.0)
    assert hv_share([dominated], 120.0, ref) == pytest.approx(3 * 20 / 120)
    # a point beyond the reference adds nothing and does not break the volume
    assert front_volume([(-0.5, 10.0), (-5.0, 60.0)], ref) == 0.0


def test_gpu_seconds_count_until_the_first_trial_within_95_percent():
    ts = [Trial(1.0, 1, 100.0), Trial(9.4, 1, 50.0), Trial(9.6, 1, 30.0), Trial(10, 1, 5.0)]
    assert gpu_seconds_to(ts, 10.0) == pytest.approx(180.0)
    assert gpu_seconds_to(ts[:2], 10.0) == math.inf


def test_the_paired_test_is_wilcoxons_on_the_seed_by_seed_differences():
    from scipy.stats import wilcoxon
    a = [0.9, 0.8, 0.95, 0.7, 0.85, 0.9, 0.99, 0.6, 0.75, 0.8]
    b = [0.5, 0.6, 0.7, 0.72, 0.4, 0.5, 0.6, 0.55, 0.5, 0.45]
    t = paired_test(a, b)
    assert (t.n, t.wins, t.losses) == (10, 9, 1)
    assert t.p == pytest.approx(wilcoxon([x - y for x, y in zip(a, b)]).pvalue)
    assert t.p < 0.05
    assert paired_test(b, a).p == pytest.approx(t.p) and paired_test(b, a).wins == 1


def test_equal_scores_give_p_1_and_nans_drop_their_pair():
    assert paired_test([1.0, 1.0], [1.0, 1.0]).p == 1.0
    t = paired_test([1.0, math.nan, 2.0], [0.5, 1.0, 1.0])
    assert t.n == 2 and t.wins == 2


def test_a_study_that_never_reached_ranks_last_in_the_paired_test():
    # a reached in a few hundred GPU-s on every seed, b never: negated, a's are all higher
    a = [-300.0, -200.0, -400.0, -250.0, -350.0, -300.0]
    b = [-math.inf] * 6
    t = paired_test(a, b)
    assert t.wins == 6 and t.p < 0.05 and t.median_diff == math.inf
    # neither reached on a seed: a tie, not a NaN that would spoil the test
    both = paired_test(a + [-math.inf] * 4, b + [-math.inf] * 4)
    assert (both.n, both.wins, both.losses) == (10, 6, 0) and both.p == pytest.approx(t.p)


def test_median_and_quartiles_keep_inf_as_the_largest():
    assert median([1.0, 3.0, math.nan, 2.0]) == 2.0
    assert median([1.0, math.inf, math.inf]) == math.inf
    assert quartiles([1.0, 2.0, 3.0, 4.0]) == (1.0, 3.0)
    assert math.isnan(median([]))


def test_bisection_finds_the_highest_rate_that_holds_within_its_tolerance():
    assert bisect_capacity(lambda r: r <= 7.3, 0.1, 40.0, 0.01) == pytest.approx(7.3, rel=0.01)
    assert bisect_capacity(lambda r: r <= 7.3, 0.1, 40.0, 0.01) <= 7.3
    assert bisect_capacity(lambda r: False, 0.1, 40.0, 0.01) == 0.0
    assert bisect_capacity(lambda r: True, 0.1, 40.0, 0.01) == 40.0  # censored at the top


def test_the_start_cost_model_reads_the_committed_h100_phases(tmp_path):
    import json
    from start_cost import load
    trials = [  # eager; compiled after the machine's first; the first (it paid the import)
        {"flags": {"enforce_eager": True}, "phases": {"start": 10.0, "ladder": 80.0,
                                                      "stop": 0.5, "gpu_release": 0.5}},
        {"flags": {}, "phases": {"start": 30.0, "ladder": 90.0, "stop": 1.0},
         "start_phases": {"process_start": 1.0}},
        {"flags": {}, "phases": {"start": 90.0, "ladder": 70.0, "stop": 1.0},
         "start_phases": {"process_start": 20.0}},
        {"flags": {}, "phases": {}},  # interrupted: no phases, not counted
    ]
    path = tmp_path / "trials.json"
    path.write_text(json.dumps(trials))
    c = load(path)
    assert (c.eager, c.compiled, c.first, c.import_s, c.ladder) == (10.0, 30.0, 90.0, 20.0, 80.0)
    assert c.trial_s(eager=False, first=False, started=True, warmup_s=15.0) == 30 + 15 + 80 + 1
    assert c.trial_s(eager=True, first=True, started=True, warmup_s=0.0, gpus=2) == \
        2 * (10 + 20 + 80 + 1)
    assert c.trial_s(eager=False, first=True, started=False, warmup_s=15.0) == 90.0
    committed = load()  # the H100 study: its README's medians
    assert round(committed.compiled, 1) == 27.3 and round(committed.first, 1) == 88.2

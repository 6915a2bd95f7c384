"""tuner.search.front with one and three objectives (issue 43): model-based proposals that
beat random search on cheap analytic toys with a constraint, within the same budget."""

import math

import numpy as np
import optuna
import pytest
from optuna._hypervolume import compute_hypervolume
from optuna.distributions import FloatDistribution

from tuner.search.front.acquisition import end_improvement, improvement
from tuner.search.front import MOVE, FrontSampler, FrontSettings
from tuner.spec.study import Objective
from tuner.trials.reference import rule_for

SPACE = {n: FloatDistribution(0.0, 1.0) for n in ("x1", "x2", "x3", "x4")}
BUDGET = 24
SEEDS = (0, 1, 2)


def _peak(p) -> float:
    """One positive objective, a smooth bump: best (4) at x = (0.7, 0.3, 0.6, 0.4)."""
    d2 = ((p["x1"] - 0.7) ** 2 + (p["x2"] - 0.3) ** 2 + (p["x3"] - 0.6) ** 2
          + (p["x4"] - 0.4) ** 2)
    return 1.0 + 3.0 * math.exp(-d2 / 0.25)


def _dtlz2(p) -> list[float]:
    """DTLZ2 in three objectives (two position variables, two of distance), turned into
    positive values: one maximised, two minimised."""
    g = (p["x3"] - 0.5) ** 2 + (p["x4"] - 0.5) ** 2
    a, b = p["x1"] * math.pi / 2, p["x2"] * math.pi / 2
    f = [(1 + g) * math.cos(a) * math.cos(b), (1 + g) * math.cos(a) * math.sin(b),
         (1 + g) * math.sin(a)]
    return [3.0 - f[0], 1.0 + f[1], 1.0 + f[2]]


def _constraint(p) -> float:
    """<= 0 where the configuration meets its SLO: a corner of the space misses it."""
    return p["x1"] + p["x2"] - 1.6


def _study(directions, sampler, objective) -> optuna.Study:
    study = optuna.create_study(directions=directions, sampler=sampler)
    for _ in range(BUDGET):
        t = study.ask(SPACE)
        t.set_constraint("slo", _constraint(t.params))
        study.tell(t, objective(t.params))
    return study


def _ok(study) -> list:
    return [t for t in study.trials if t.constraints["slo"] <= 0]


def _moves(study) -> list[dict]:
    return [t.system_attrs[MOVE] for t in study.trials if MOVE in t.system_attrs]


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_the_improvement_is_the_hypervolume_a_point_adds(dims):
    rng = np.random.default_rng(dims)
    ref = np.full(dims, 0.9)

    def volume(pts: np.ndarray) -> float:
        pts = pts[(pts < ref).all(1)]
        return compute_hypervolume(pts, ref) if len(pts) else 0.0
    for n in (0, 1, 6):
        front = rng.random((n, dims))
        points = rng.random((30, dims))
        want = [volume(np.vstack([front, p[None]])) - volume(front) for p in points]
        assert np.allclose(improvement(points, front, ref), want)


def test_an_end_of_three_counts_only_inside_the_other_references():
    ref = np.array([1.0, 1.0, 1.0])
    front = np.array([[0.5, 0.5, 0.5]])
    draws = np.array([[[0.2, 0.9, 0.9], [0.2, 0.9, 1.1], [0.6, 0.1, 0.1]]])
    assert np.allclose(end_improvement(draws, front[None], ref, 0), [0.3, 0.0, 0.0])


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_one_objective_gets_expected_improvement_and_beats_random(direction):
    sign = 1.0 if direction == "maximize" else -1.0
    goal = Objective(metric="p99_ttft_ms" if sign < 0 else "output_throughput",
                     direction=direction)
    settings = FrontSettings(rule_for([goal], {}, {}, [0.0 if sign > 0 else 10.0]),
                             (goal.metric,))

    def objective(p):  # minimised: the bump turned upside down, still positive
        return _peak(p) if sign > 0 else 5.0 - _peak(p)
    wins = 0
    for seed in SEEDS:
        front = _study([direction], FrontSampler(settings, seed=seed), objective)
        rand = _study([direction], optuna.samplers.RandomSampler(seed=seed), objective)
        moves = _moves(front)
        assert len(moves) >= BUDGET - 8, moves  # the model proposes after a few trials
        assert {m["kind"] for m in moves} == {"model"}
        assert {m["aim"] for m in moves} == {"ei"}
        best = max(sign * t.value for t in _ok(front))
        wins += best > max(sign * t.value for t in _ok(rand))
    assert wins == len(SEEDS)


def test_three_objectives_get_ehvi_with_each_end_and_beat_random():
    goals = [Objective(metric="output_throughput", direction="maximize"),
             Objective(metric="p99_itl_ms", direction="minimize"),
             Objective(metric="p99_ttft_ms", direction="minimize")]
    worst = [1.0, 3.0, 3.0]
    settings = FrontSettings(rule_for(goals, {}, {}, worst), tuple(g.metric for g in goals))
    directions = [g.direction for g in goals]
    ref = np.array([-1.0, 3.0, 3.0])  # minimised

    def volume(study) -> float:
        pts = np.array([t.values for t in _ok(study)]) * [-1.0, 1.0, 1.0]
        return compute_hypervolume(pts[(pts < ref).all(1)], ref)
    wins = 0
    for seed in SEEDS:
        front = _study(directions, FrontSampler(settings, seed=seed), _dtlz2)
        rand = _study(directions, optuna.samplers.RandomSampler(seed=seed), _dtlz2)
        moves = _moves(front)
        assert len(moves) >= BUDGET - 8, moves
        assert {m["aim"] for m in moves} == {"ehvi", "end:0", "end:1", "end:2"}
        wins += volume(front) > volume(rand)
    assert wins == len(SEEDS)


def test_four_objectives_are_refused_not_sampled_at_random():
    goals = [Objective(metric=m, direction="minimize")
             for m in ("p99_itl_ms", "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms")]
    settings = FrontSettings(rule_for(goals, {}, {}, [1.0] * 4))
    study = optuna.create_study(directions=["minimize"] * 4,
                                sampler=FrontSampler(settings, seed=0))
    study.enqueue_trial({n: 0.5 for n in SPACE})
    t = study.ask(SPACE)
    study.tell(t, [1.0] * 4)
    with pytest.raises(ValueError, match="serves 1, 2, 3 objectives, not 4"):
        study.ask(SPACE)

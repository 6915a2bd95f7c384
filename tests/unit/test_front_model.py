"""tuner.search.front.model and .candidates: the objectives' Box-Cox power and the trust
region the model's candidates are drawn in (docs/decisions/0007-trust-region-and-box-cox.md)."""

import numpy as np

from tuner.search.front.candidates import trust_region
from tuner.search.front.gp import fit
from tuner.search.front.model import Objectives, box_cox, fit_power, inverse, probability
from tuner.search.front.settings import FrontSettings
from tuner.trials.reference import rule_for

SETTINGS = FrontSettings(rule_for([], {}, {}, []))


def test_a_saturating_throughput_gets_a_power_whose_upper_tail_stays_near_what_was_measured():
    # throughput saturates at ~4,100 in one flag (most trials near it, a few far below), as
    # 8B's does; on the log scale a point far from the data draws far above the saturation
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X = rng.random((16, 3))
        v = 4100 - 3500 * np.exp(-8 * X[:, 0])
        gp, power = fit_power(X, v)
        assert power > 0
        log = fit(X, np.log(v))
        far = np.array([[0.9, 0.05, 0.95]])
        (mu, sd), (mu_log, sd_log) = gp.predict(far), log.predict(far)
        upper, upper_log = inverse(mu + 2 * sd, power)[0], np.exp(mu_log + 2 * sd_log)[0]
        assert upper < upper_log
        assert upper < 1.1 * v.max()


def test_log_normal_values_keep_the_log_and_the_transform_inverts():
    rng = np.random.default_rng(1)
    X = rng.random((16, 3))
    v = 100 * np.exp(2 * X[:, 0] + rng.normal(0, 0.05, 16))
    assert fit_power(X, v)[1] == 0.0
    for power in (-1.0, 0.0, 0.5, 1.0, 2.0):
        assert np.allclose(inverse(box_cox(v, power), power), v)


def test_each_objective_is_read_on_its_own_power():
    objs = Objectives((), (2.0, 0.0), np.array([True, False]))
    z = np.stack([box_cox(np.array([4000.0, 3000.0]), 2.0), np.log([20.0, 10.0])], -1)
    assert np.allclose(objs.minimised(z), [[-4000.0, 20.0], [-3000.0, 10.0]])


def test_the_trust_region_moves_a_steep_flag_a_little_and_a_flat_one_far():
    rng = np.random.default_rng(0)
    centre = np.array([[0.5, 0.5, 0.0]])
    cat = np.array([False, False, True])
    pts = trust_region(centre, cat, np.array([0.1, 10.0, 1.0]), 2000, rng, SETTINGS)
    # weights: the length scales (10 capped at 2) over their geometric mean, sqrt(0.2)
    half = 0.5 * SETTINGS.region * 0.1 / np.sqrt(0.2)
    assert np.abs(pts[:, 0] - 0.5).max() <= half + 1e-12
    assert pts[:, 1].min() == 0.0 and pts[:, 1].max() == 1.0  # the whole range, clipped
    assert 0.8 < np.mean(pts[:, 2] == 0.0) < 1.0  # the categorical mostly kept
    uniform = np.random.default_rng(0).random((2000, 3))  # the candidates drawn before
    assert np.mean(np.abs(uniform[:, 0] - 0.5) <= half) < 0.25


def test_the_odds_of_a_value_above_zero_follow_the_data_and_stay_put_when_it_does():
    X = np.linspace(0.0, 1.0, 9)[:, None]
    started = np.where(X[:, 0] < 0.5, -1.0, 1.0)  # nothing below the middle starts
    none = np.zeros((0, 1))
    odds = probability(X, started, none, SETTINGS.started_noise, None, SETTINGS.sd_floor)
    low, high = odds(np.array([[0.1], [0.9]]))
    assert low < 0.2 and high > 0.8
    always = probability(X, np.ones(9), none, SETTINGS.started_noise, None, SETTINGS.sd_floor)
    assert always(np.array([[0.1], [0.9]])).tolist() == [1.0, 1.0]

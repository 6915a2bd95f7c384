"""tuner.search.front.candidates and .acquisition: where the model looks, what is fresh,
and how a candidate is scored and chosen (toy trials and toy draws, no sampler)."""

from dataclasses import replace

import numpy as np
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.study import StudyDirection

from tuner.search.front.acquisition import aim, choose, gain
from tuner.search.front.candidates import candidates, fresh, onfront, unasked, weights
from tuner.search.front.history import history
from tuner.search.front.settings import FrontSettings
from tuner.spec.study import DEFAULT_OBJECTIVES
from tuner.testing.told import row, stored
from tuner.trials.reference import rule_for

SPACE = {"max_num_batched_tokens": IntDistribution(64, 16384, log=True),
         "max_num_seqs": IntDistribution(1, 1024, log=True),
         "enable_prefix_caching": CategoricalDistribution([True, False])}
DEFAULT = {"max_num_batched_tokens": 8192, "max_num_seqs": 256, "enable_prefix_caching": True}
SETTINGS = FrontSettings(rule_for(DEFAULT_OBJECTIVES, {}, {}, [0.0, 1000.0]),
                         ("output_throughput", "p99_itl_ms"))


def _cap(params):
    """A toy rule: the engine runs at most 256 sequences."""
    return {**params, "max_num_seqs": min(params["max_num_seqs"], 256)}


def _history(rows, settings=SETTINGS):
    return history(settings, stored(SPACE, rows),
                   [StudyDirection.MAXIMIZE, StudyDirection.MINIMIZE], SPACE)


def _toy(seqs, tokens):
    """Throughput and p99 ITL both grow with the sequences and the budget."""
    return [1000.0 * (1 - np.exp(-seqs / 64)) + tokens / 100, 5.0 + seqs / 20 + tokens / 1000]


def test_within_near_of_a_configuration_asked_nothing_is_fresh():
    h = _history([row(DEFAULT, [1000.0, 20.0])])
    x = h.enc.encode(DEFAULT)
    near, far = x.copy(), x.copy()
    seqs = h.enc.names.index("max_num_seqs")
    near[seqs] += SETTINGS.near / 2
    far[seqs] += 2 * SETTINGS.near
    other = h.enc.encode({**DEFAULT, "enable_prefix_caching": False})
    assert fresh(h, SETTINGS, np.array([x, near, far, other])).tolist() == [
        False, False, True, True]


def test_a_configuration_the_rules_run_as_one_asked_was_asked():
    capped = replace(SETTINGS, repair=_cap)
    h = _history([row(DEFAULT, [1000.0, 20.0])], capped)
    assert not unasked(h, capped, {**DEFAULT, "max_num_seqs": 512})  # runs as 256
    assert unasked(h, SETTINGS, {**DEFAULT, "max_num_seqs": 512})  # without the rule: new


def test_the_front_is_the_measured_trials_no_other_beats_on_both_objectives():
    h = _history([row({**DEFAULT, "max_num_seqs": s}, v) for s, v in (
        (256, [1000.0, 20.0]), (64, [800.0, 10.0]), (128, [700.0, 15.0]))])
    assert onfront(h) == [0, 1]


def test_the_candidates_are_fresh_and_where_the_rules_run_them():
    capped = replace(SETTINGS, repair=_cap)
    rows = [row({**DEFAULT, "max_num_seqs": s, "max_num_batched_tokens": b}, _toy(s, b))
            for s, b in ((256, 8192), (64, 2048), (16, 512), (128, 1024), (32, 4096))]
    h = _history(rows, capped)
    cands = candidates(h, capped, np.random.default_rng(0))
    assert len(cands) > 0 and fresh(h, capped, cands).all()
    assert all(h.enc.decode(c)["max_num_seqs"] <= 256 for c in cands)


def test_the_trust_region_is_weighed_by_the_processes_geometric_mean():
    assert np.allclose(weights([np.array([1.0, 4.0]), np.array([4.0, 1.0])]), [2.0, 2.0])
    assert np.allclose(weights([np.array([8.0]), np.array([1.0]), np.array([1.0])]), [2.0])


def test_one_model_proposal_in_ends_pushes_each_end_in_turn():
    def aims(count):
        return [aim([{"kind": "model"}] * n + [{"kind": "probe"}], count, 3) for n in range(9)]
    assert aims(2) == ["ehvi", "ehvi", "end:0", "ehvi", "ehvi", "end:1", "ehvi", "ehvi",
                       "end:0"]
    assert aims(3)[2::3] == ["end:0", "end:1", "end:2"]
    assert set(aims(1)) == {"ei"}  # one objective: no ends


def test_an_end_scores_only_how_far_a_candidate_pushes_it():
    front = np.array([[[-100.0, 20.0]]])  # one draw of a one-point front, minimised
    ref = np.array([-50.0, 100.0])
    draws = np.array([[[-110.0, 50.0], [-90.0, 10.0]]])  # more throughput; lower ITL
    assert gain("end:0", draws, front, ref).tolist() == [10.0, 0.0]
    assert gain("end:1", draws, front, ref).tolist() == [0.0, 10.0]
    assert (gain("ehvi", draws, front, ref) > 0).all()


def test_with_no_feasible_trial_the_likeliest_feasible_candidate_is_proposed():
    gains = np.array([100.0, 1.0, 0.0])  # a large box at long odds, a small one, nothing
    pf = np.array([0.02, 0.5, 0.3])
    sd = np.zeros(3)
    assert choose(gains, pf, sd, True, SETTINGS.nudge) == 0  # 2.0 against 0.5
    assert choose(gains, pf, sd, False, SETTINGS.nudge) == 1  # the likeliest to be feasible
    assert choose(np.zeros(3), pf, sd, True, SETTINGS.nudge) == 1
    assert choose(np.zeros(3), np.ones(3), np.array([0.0, 2.0, 1.0]), True,
                  SETTINGS.nudge) == 1  # equal odds: the most uncertain

"""tuner.search.front.history and .probes: the trials as one proposal sees them, and the
start-up schedule that moves from the default (toy trials, no sampler)."""

import math
from dataclasses import replace

import numpy as np
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.study import StudyDirection
from optuna.trial import TrialState

from tuner.search.front.history import history, moves_of, origin, pending_of
from tuner.search.front.probes import parents, probe
from tuner.search.front.settings import PROBES, FrontSettings
from tuner.spec.study import DEFAULT_OBJECTIVES
from tuner.search.front.sampler import claimed
from tuner.testing.told import row, stored, stored_study
from tuner.trials.reference import rule_for

SPACE = {"max_num_batched_tokens": IntDistribution(64, 16384, log=True),
         "max_num_seqs": IntDistribution(1, 1024, log=True),
         "enable_prefix_caching": CategoricalDistribution([True, False])}
DEFAULT = {"max_num_batched_tokens": 8192, "max_num_seqs": 256, "enable_prefix_caching": True}
DIRECTIONS = [StudyDirection.MAXIMIZE, StudyDirection.MINIMIZE]
SETTINGS = FrontSettings(rule_for(DEFAULT_OBJECTIVES, {}, {}, [0.0, 1000.0]),
                         ("output_throughput", "p99_itl_ms"))


def _history(rows, settings=SETTINGS, moves=None):
    trials = stored(SPACE, rows)
    with_params = [t for t in trials if set(SPACE) <= set(t.params)]
    return history(settings, with_params, DIRECTIONS, SPACE,
                   moves if moves is not None else moves_of(trials), pending_of(trials, SPACE))


def _with(**flags):
    return {**DEFAULT, **flags}


def test_the_history_sorts_the_trials_into_told_measured_in_flight_and_the_default():
    h = _history([row(DEFAULT, [1000.0, 20.0], baseline="default"),
                  row(_with(max_num_seqs=8), [0.0, 1000.0], starts=1.0, outcome="infeasible"),
                  row(_with(max_num_seqs=16), [900.0, 15.0], outcome="duplicate"),
                  row(_with(max_num_seqs=32), state=TrialState.RUNNING),
                  row({}, state=TrialState.RUNNING,  # still being asked: only its move
                      move={"kind": "probe", "params": _with(max_num_seqs=64)})])
    assert [t.number for t in h.told] == [0, 1]  # a duplicate tells nothing new
    assert [t.number for t in h.measured] == [0]  # one that did not start is no data
    assert [t.number for t in h.running] == [3]
    assert h.pending == (_with(max_num_seqs=64),)
    assert h.default.number == 0 and h.maximise.tolist() == [True, False]
    asked = {tuple(x) for x in h.asked.tolist()}
    for seqs in (256, 8, 16, 32, 64):  # measured, refused, duplicate, running, being asked
        assert tuple(h.enc.encode(_with(max_num_seqs=seqs)).tolist()) in asked


def test_a_trial_counts_where_it_ran_not_where_it_was_asked():
    # asked for 512 sequences, the rules ran 256 (its effective flags)
    h = _history([row(_with(max_num_seqs=512), [1000.0, 20.0], flags=DEFAULT)])
    assert origin(h.measured[0], SPACE) == DEFAULT
    assert np.allclose(h.measured_x[0], h.enc.encode(DEFAULT))
    asked = {tuple(x) for x in h.asked.tolist()}
    assert {tuple(h.enc.encode(p).tolist()) for p in (DEFAULT, _with(max_num_seqs=512))} <= asked


def test_a_cap_the_engine_never_reached_echoes_the_trial():
    report = {"running_peak": 100.0, "kv_cache_usage_peak": 0.99, "preemptions": 0.0}
    h = _history([row(DEFAULT, [1000.0, 20.0], baseline="default", server=report),
                  row(_with(max_num_seqs=64), [500.0, 10.0])])  # no report: no echo
    assert len(h.echoes) == 1 and h.echoes[0][0] == 0
    assert h.enc.decode(h.echoes[0][1]) == _with(max_num_seqs=1024)  # the space's top


def test_the_first_probe_moves_the_default_towards_low_latency_within_the_jitter():
    params, move = probe(_history([row(DEFAULT, [1000.0, 20.0], baseline="default")]),
                         SETTINGS, seed=0)
    assert move == {"kind": "probe", "probe": 0, "parent": 0}
    spread = math.exp(SETTINGS.jitter)
    for name, factor in PROBES[0].items():
        aim = DEFAULT[name] * factor
        assert aim / spread - 1 <= params[name] <= aim * spread + 1
    assert params["enable_prefix_caching"] is True  # a probe keeps the categorical flags


def test_each_seed_jitters_the_probes_its_own_way():
    h = _history([row(DEFAULT, [1000.0, 20.0], baseline="default")])
    assert probe(h, SETTINGS, 0) == probe(h, SETTINGS, 0)
    assert probe(h, SETTINGS, 0)[0] != probe(h, SETTINGS, 1)[0]


def test_a_probe_another_trial_holds_is_skipped():
    h = _history([row(DEFAULT, [1000.0, 20.0], baseline="default")],
                 moves=[{"kind": "probe", "probe": 0, "parent": 0}])
    assert probe(h, SETTINGS, 0)[1]["probe"] == 1


def test_a_probe_the_space_clips_back_onto_its_parent_is_not_made():
    top = _with(max_num_seqs=1024)  # four times the sequences is the same configuration
    held = [{"kind": "probe", "probe": i, "parent": 0} for i in range(len(PROBES) - 1)]
    assert PROBES[-1] == {"max_num_seqs": 4.0}
    assert probe(_history([row(top, [1000.0, 20.0], baseline="default")], moves=held),
                 SETTINGS, 0) is None


def test_no_probe_before_the_default_started():
    h = _history([row(DEFAULT, [0.0, 1000.0], baseline="default", starts=1.0,
                      outcome="infeasible")])
    assert probe(h, SETTINGS, 0) is None


def test_the_probes_also_move_from_a_baseline_in_the_other_mode_until_that_side_loses():
    modes = replace(SETTINGS, cells=("enable_prefix_caching",))
    rows = [row(DEFAULT, [1000.0, 20.0], baseline="default"),
            row(_with(enable_prefix_caching=False), [800.0, 10.0], baseline="article")]
    assert [t.number for t in parents(_history(rows), SETTINGS)] == [0]  # no mode switch
    assert [t.number for t in parents(_history(rows), modes)] == [0, 1]
    beaten = rows + [row(_with(max_num_seqs=64), [900.0, 9.0])]  # prefix caching on
    assert [t.number for t in parents(_history(beaten), modes)] == [0]


def test_a_configuration_a_running_trial_already_runs_is_claimed():
    """Check, then act: another worker's trial may be asked, and its parameters written,
    between this proposal's history and its claim check; the configuration it runs is
    held as much as one still being asked, and any other stays free."""
    held = _with(max_num_seqs=64)
    study = stored_study(SPACE, [row(DEFAULT, [1000.0, 20.0], baseline="default"),
                                 row(held, state=TrialState.RUNNING),  # its params written
                                 row({}, state=TrialState.RUNNING)])   # this proposal's trial
    mine = study.get_trials(deepcopy=False)[-1]
    h = _history([row(DEFAULT, [1000.0, 20.0], baseline="default")])
    assert claimed(SETTINGS, study, mine, {"kind": "model", "params": held}, h)
    assert not claimed(SETTINGS, study, mine, {"kind": "model", "params": _with(max_num_seqs=32)},
                       h)
    assert not claimed(replace(SETTINGS, claim_check=False), study, mine,
                       {"kind": "model", "params": held}, h)

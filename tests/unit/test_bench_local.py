"""bench/contenders/local.py, the previous default kept as a benchmark contender: probes
around the default, local moves, no repeated configuration."""

import sys
from pathlib import Path

import optuna
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from contenders.local import MOVE, LocalSampler, pareto  # noqa: E402
from contenders.plan import SearchPlan  # noqa: E402
from contenders.steps import LOG_FACTORS, PROBES  # noqa: E402
from tuner.search import warm_start  # noqa: E402
from tuner.space import baselines, build_space  # noqa: E402
from tuner.storage import load_study_file  # noqa: E402


@pytest.fixture
def space(study_file):
    return build_space(load_study_file(study_file('[model]\npath = "models/llama3-8b"\n')))


@pytest.fixture
def lossy_space(study_file):
    """The same space with the fp8 KV cache opted in (``[space] lossy``)."""
    return build_space(load_study_file(study_file(
        '[model]\npath = "models/llama3-8b"\n[space]\nlossy = ["kv_cache_dtype"]\n')))


def _study(seed=0):
    return optuna.create_study(directions=["maximize", "minimize"],
                               sampler=LocalSampler(optuna.samplers.RandomSampler(seed=seed),
                                                    seed=seed))


def _toy(params):
    """Throughput up with the budget, ITL up with the budget and the sequences."""
    return [params["max_num_batched_tokens"] / 100, params["max_num_seqs"] / 10
            + params["max_num_batched_tokens"] / 1000]


def _after_the_baselines(space):
    """A local-sampler study with the three baselines enqueued, asked and told."""
    study = _study()
    warm_start(study, space)
    dists = space.distributions()
    for _ in baselines(space):
        t = study.ask(dists)
        study.tell(t, _toy(t.params))
    return study, dists


def _probes_from_the_default(space):
    study, dists = _after_the_baselines(space)
    default = next(t.params for t in study.trials if t.user_attrs.get("baseline") == "default")
    seen_moves = []
    for _ in range(2 * len(PROBES)):
        t = study.ask(dists)
        move = study.trials[t.number].system_attrs.get(MOVE, {})
        if move.get("kind") == "probe" and move["parent"] == 0:  # from the default
            changed = {k: v for k, v in t.params.items() if v != default[k]}
            assert 1 <= len(changed) <= 2, changed  # one or two flags moved
            seen_moves.append(tuple(sorted(changed.items())))
        study.tell(t, _toy(t.params))
    return default, seen_moves


def test_an_opted_in_study_probes_the_fp8_kv_cache_first(lossy_space):
    _, seen_moves = _probes_from_the_default(lossy_space)
    assert (("kv_cache_dtype", "fp8"),) == seen_moves[0]


def test_after_the_baselines_come_the_one_flag_probes_from_the_default(space):
    """(Before issue 17 the fp8 KV cache was the first probe; the default space is now
    lossless, so the probe has no value to move to and is skipped.)"""
    default, seen_moves = _probes_from_the_default(space)
    assert not any(name == "kv_cache_dtype" for move in seen_moves for name, _ in move)
    assert (("max_num_seqs", default["max_num_seqs"] // 4),) in seen_moves
    assert (("max_num_batched_tokens", default["max_num_batched_tokens"] // 2),) in seen_moves
    assert (("enable_prefix_caching", not default["enable_prefix_caching"]),) in seen_moves


def test_never_asks_the_same_configuration_twice(space):
    study = _study(seed=3)
    warm_start(study, space)
    dists = space.distributions()
    for _ in range(40):
        t = study.ask(dists)
        study.tell(t, _toy(t.params))
    keys = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(keys) == len(set(keys))


def test_local_moves_start_from_measured_pareto_points_not_refused_ones():
    directions = ["maximize", "minimize"]
    study = optuna.create_study(directions=directions)
    study.enqueue_trial({"x": 64})
    good = study.ask({"x": optuna.distributions.IntDistribution(1, 1024, log=True)})
    study.tell(good, [10.0, 1.0])
    # the refused point's own value: away from every move of the measured one (a random
    # value near a move made that move a near duplicate, and the base sampler proposed)
    study.enqueue_trial({"x": 512})
    bad = study.ask({"x": optuna.distributions.IntDistribution(1, 1024, log=True)})
    bad.set_constraint("starts", 1.0)
    bad.set_user_attr("outcome", "infeasible")
    study.tell(bad, [100.0, 0.1])  # would dominate if it counted
    done = [t for t in study.trials]
    assert [t.number for t in pareto(done, [-1.0, 1.0])] == [1]  # plain Pareto on values
    sampler = LocalSampler(optuna.samplers.RandomSampler(seed=0), seed=0, local_share=1.0)
    study.sampler = sampler
    x = good.params["x"]
    moves = {min(max(round(x * f), 1), 1024) for f in LOG_FACTORS}
    for _ in moves:  # then every move has been asked: the base sampler's turn
        t = study.ask({"x": optuna.distributions.IntDistribution(1, 1024, log=True)})
        # a move from the measured point (a factor), never from the refused one
        assert t.params["x"] in moves
        study.tell(t, [0.0, 1e9])


def test_the_local_plan_is_the_local_sampler_around_tpe():
    sampler = SearchPlan("local", n_startup_trials=5).sampler_for(0)
    assert isinstance(sampler, LocalSampler)
    assert isinstance(sampler._base, optuna.samplers.TPESampler)


def test_a_move_that_gains_is_repeated_from_where_it_landed():
    dist = {"b": optuna.distributions.IntDistribution(128, 32768, log=True)}
    sampler = LocalSampler(optuna.samplers.RandomSampler(seed=0), seed=0,
                           probes=({"b": ["x", 0.5]},))
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.enqueue_trial({"b": 8192}, user_attrs={"baseline": "default"})
    study.tell(study.ask(dist), [100.0, 100.0])
    asked = []
    for values in ([110.0, 90.0], [120.0, 80.0], [130.0, 70.0]):  # each move gains
        t = study.ask(dist)
        asked.append(t.params["b"])
        study.tell(t, values)
    assert asked == [4096, 2048, 1024]  # the probe, then the pattern move twice


def test_with_another_trial_in_flight_the_base_sampler_proposes(space):
    """Parallel workers: the local moves are deterministic, so while another trial runs the
    proposal comes from the base sampler (its own seed per worker) instead."""
    study, dists = _after_the_baselines(space)
    alone = study.ask(dists)  # nothing else running: a probe from the default
    assert MOVE in study.trials[alone.number].system_attrs
    beside = study.ask(dists)  # `alone` still runs: the base sampler's proposal
    assert MOVE not in study.trials[beside.number].system_attrs
    study.tell(alone, _toy(alone.params))
    study.tell(beside, _toy(beside.params))
    after = study.ask(dists)  # alone again: local moves resume
    assert MOVE in study.trials[after.number].system_attrs


def test_probes_move_from_the_trial_that_gains_and_from_the_flags_it_ran_with():
    """A trial the rule set repaired (budget 512 asked, 2560 run: without chunked prefill the
    budget must cover max-model-len) gains over the default: the next probe halves the
    budget it ran with (1,280), not the one it asked for (256), nor the default's (4,096)."""
    dists = {"max_num_batched_tokens": optuna.distributions.IntDistribution(128, 32768, log=True),
             "enable_chunked_prefill": optuna.distributions.CategoricalDistribution([False, True])}
    study = _study()
    default = {"max_num_batched_tokens": 8192, "enable_chunked_prefill": True}
    study.enqueue_trial(default, user_attrs={"baseline": "default", "flags": default})
    t = study.ask(dists)
    study.tell(t, [100.0, 50.0])
    repaired = optuna.trial.create_trial(
        params={"max_num_batched_tokens": 512, "enable_chunked_prefill": False},
        distributions=dists, values=[110.0, 30.0],
        user_attrs={"flags": {"max_num_batched_tokens": 2560, "enable_chunked_prefill": False}})
    study.add_trial(repaired)
    proposed = study.ask(dists)
    assert proposed.params == {"max_num_batched_tokens": 1280, "enable_chunked_prefill": False}
    assert study.trials[proposed.number].system_attrs[MOVE]["parent"] == 1


B = {"b": optuna.distributions.IntDistribution(128, 32768, log=True)}


def _from_default(probes, told, extra=(), default_values=(100.0, 100.0)):
    """A study whose default (b=8192) measured ``default_values``; ``extra`` trials added
    as (b, values); then each value pair of ``told`` answers the next proposal. Returns the
    study and the proposed budgets."""
    sampler = LocalSampler(optuna.samplers.RandomSampler(seed=0), seed=0, probes=probes)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.enqueue_trial({"b": 8192}, user_attrs={"baseline": "default"})
    study.tell(study.ask(B), list(default_values))
    for b, values in extra:
        study.add_trial(optuna.trial.create_trial(params={"b": b}, distributions=B,
                                                  values=list(values)))
    asked = []
    for values in told:
        t = study.ask(B)
        asked.append(t.params["b"])
        study.tell(t, list(values))
    return study, asked


def test_a_probe_that_beats_the_default_is_mirrored_from_the_same_parent():
    # half the budget gains; halving again loses throughput; then twice the default's
    _, asked = _from_default(({"b": ["x", 0.5]},),
                             [(105.0, 60.0), (90.0, 40.0), (101.0, 150.0)])
    assert asked == [4096, 2048, 16384]


def test_a_move_that_lost_both_objectives_is_tried_at_half_its_size():
    """A jagged response: 2,048 is worse than 4,096 on both objectives, so the best may
    lie between them: the next proposal is their geometric midpoint from 4,096."""
    study, asked = _from_default(({"b": ["x", 0.5]},),
                                 [(110.0, 60.0), (105.0, 70.0), (101.0, 150.0), (108.0, 50.0)])
    assert asked == [4096, 2048, 16384, 2896]
    assert study.trials[-1].system_attrs[MOVE] == {
        "kind": "extend", "parent": 1, "steps": {"b": ["x", pytest.approx(0.5 ** 0.5)]}}


def test_the_gap_between_two_front_points_is_filled_at_their_geometric_midpoint():
    study, asked = _from_default((), [(104.0, 50.0)],
                                 extra=[(4096, (105.0, 60.0)), (2048, (102.0, 40.0))])
    assert asked == [2896]
    assert study.trials[-1].system_attrs[MOVE]["kind"] == "fill"


def test_a_number_within_2_percent_of_an_asked_one_is_not_proposed():
    # 4,050 was measured: the probe's 4,096 is as good as asked, so it is not proposed
    study, asked = _from_default(({"b": ["x", 0.5]},), [(99.0, 99.0)] * 5,
                                 extra=[(4050, (99.0, 120.0))])
    assert all(abs(b / 4050 - 1) >= 0.02 and abs(b / 8192 - 1) >= 0.02 for b in asked)


def test_a_probe_that_changed_nothing_is_not_probed_again_from_the_next_centre():
    dists = {**B, "a": optuna.distributions.CategoricalDistribution([16, 32])}
    probes = ({"a": ["=", 32]}, {"b": ["x", 0.5]})
    sampler = LocalSampler(optuna.samplers.RandomSampler(seed=0), seed=0, probes=probes,
                           local_share=0.0)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.enqueue_trial({"b": 8192, "a": 16}, user_attrs={"baseline": "default"})
    study.tell(study.ask(dists), [100.0, 100.0])
    values = {(8192, 32): [100.0, 100.0], (4096, 16): [110.0, 60.0]}  # block size inert
    for _ in range(6):
        t = study.ask(dists)
        study.tell(t, values.get((t.params["b"], t.params["a"]), [50.0, 200.0]))
    probed_a = [t.params for t in study.trials
                if t.system_attrs.get(MOVE, {}).get("steps", {}).get("a")]
    assert probed_a == [{"b": 8192, "a": 32}]  # from the default only, not from 4,096


def test_without_chunking_a_budget_tied_to_the_length_moves_with_it():
    dists = {"max_num_batched_tokens": B["b"],
             "max_model_len": optuna.distributions.IntDistribution(1024, 8192, log=True),
             "enable_chunked_prefill": optuna.distributions.CategoricalDistribution([False, True])}
    sampler = LocalSampler(optuna.samplers.RandomSampler(seed=0), seed=0,
                           probes=({"max_num_batched_tokens": ["x", 0.5]},))
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    default = {"max_num_batched_tokens": 8192, "max_model_len": 8192,
               "enable_chunked_prefill": False}
    study.enqueue_trial(default, user_attrs={"baseline": "default", "flags": default})
    study.tell(study.ask(dists), [100.0, 100.0])
    assert study.ask(dists).params == {"max_num_batched_tokens": 4096, "max_model_len": 4096,
                                       "enable_chunked_prefill": False}


def test_a_factor_on_a_flag_in_a_flat_stretch_starts_where_the_flag_binds():
    """A quarter of the sequences changed nothing (1,024 and 256 both above the requests
    in flight): the next probe's factor on the sequences starts from 256, not 1,024."""
    dists = {**B, "s": optuna.distributions.IntDistribution(1, 1024, log=True)}
    probes = ({"s": ["x", 0.25]}, {"b": ["x", 0.5], "s": ["x", 0.5]})
    sampler = LocalSampler(optuna.samplers.RandomSampler(seed=0), seed=0, probes=probes)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.enqueue_trial({"b": 8192, "s": 1024}, user_attrs={"baseline": "default"})
    study.tell(study.ask(dists), [100.0, 100.0])
    t = study.ask(dists)
    assert t.params == {"b": 8192, "s": 256}
    study.tell(t, [100.0, 100.0])  # flat
    assert study.ask(dists).params == {"b": 4096, "s": 128}


def test_a_probe_along_a_line_already_measured_is_not_made():
    # 6,000 gains most; 4,000 was measured between it and its half (3,000)
    study, _ = _from_default(({"b": ["x", 0.5]},), [(99.0, 99.0)] * 3,
                             extra=[(6000, (110.0, 80.0)), (4000, (105.0, 90.0))])
    assert not [t for t in study.trials
                if t.system_attrs.get(MOVE, {}).get("kind") == "probe"
                and t.system_attrs[MOVE]["parent"] == 1]

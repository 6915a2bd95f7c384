"""tuner.search.local: probes around the default, local moves, no repeated configuration."""

import subprocess
import sys

import optuna
import pytest

from tuner.search import warm_start
from tuner.search.local import LOG_FACTORS, MOVE, PROBES, LocalSampler, pareto
from tuner.space import baselines, build_space
from tuner.study import load_study_file
from tuner.study.sampler import make_sampler


@pytest.fixture
def space(study_file):
    return build_space(load_study_file(study_file('[model]\npath = "models/llama3-8b"\n')))


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


def test_after_the_baselines_come_the_one_flag_probes_from_the_default(space):
    study, dists = _after_the_baselines(space)
    default = next(t.params for t in study.trials if t.user_attrs.get("baseline") == "default")
    seen_moves = []
    for _ in PROBES:
        t = study.ask(dists)
        changed = {k: v for k, v in t.params.items() if v != default[k]}
        assert 1 <= len(changed) <= 2, changed  # one or two flags moved from vLLM's defaults
        seen_moves.append(tuple(sorted(changed.items())))
        study.tell(t, _toy(t.params))
    assert (("kv_cache_dtype", "fp8"),) == seen_moves[0]
    assert (("max_num_seqs", default["max_num_seqs"] // 4),) in seen_moves
    assert (("max_num_batched_tokens", default["max_num_batched_tokens"] // 2),) in seen_moves
    assert (("enable_prefix_caching", not default["enable_prefix_caching"]),) in seen_moves
    assert (("max_num_batched_tokens", default["max_num_batched_tokens"] // 8),
            ("max_num_seqs", default["max_num_seqs"] // 8)) in seen_moves


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


def test_local_is_a_known_sampler_name():
    assert isinstance(make_sampler("local", 0), LocalSampler)


def test_the_search_code_does_not_import_the_simulator():
    code = ("import sys, tuner.search, tuner.search.local, tuner.study.sampler; "
            "print(sorted(m for m in sys.modules if m.startswith('tuner.sim')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


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

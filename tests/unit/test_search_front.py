"""tuner.search.front: the default sampler (probes, then EHVI under Gaussian processes)."""

import math

import numpy as np
import optuna
import pytest

from tuner import optuna_adapter
from tuner.trials.reference import rule_for
from tuner.search import warm_start
from tuner.search.front import MOVE, PROBES, FrontSampler, FrontSettings
from tuner.search.front.acquisition import (expected_improvement, joint_draws,
                                            posterior_draws)
from tuner.search.front.candidates import fresh
from tuner.search.front.encoding import Encoding
from tuner.search.front.gp import fit
from tuner.search.front.history import history
from tuner.search.front.model import Objectives, measured_spread
from tuner.space import baselines, build_space
from tuner.storage import load_study_file
from tuner.search.sampler import make_sampler
from tuner.spec.study import DEFAULT_OBJECTIVES

SETTINGS = FrontSettings(rule_for(DEFAULT_OBJECTIVES, {}, {}, [0.0, 1000.0]),
                         ("output_throughput", "p99_itl_ms"))


@pytest.fixture
def space(study_file):
    return build_space(load_study_file(study_file('[model]\npath = "models/llama3-8b"\n')))


def _toy(p):
    """A trade-off: throughput and ITL both grow with the budget and the sequences; the
    configuration does not start below 0.6 of the memory."""
    tokens, seqs = p["max_num_batched_tokens"], p["max_num_seqs"]
    thr = 1000 * (1 - math.exp(-tokens / 2000)) * (1 - math.exp(-seqs / 64))
    itl = 5 + tokens / 100 + seqs / 20
    return [thr, itl], p["gpu_memory_utilization"] >= 0.6


def _run(space, seed, n, workers=1, spread=None, server=None, metrics=None):
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=FrontSampler(SETTINGS, seed=seed))
    warm_start(study, space)
    dists = space.distributions()
    running = []
    while len(study.trials) < n or running:
        while len(running) < workers and len(study.trials) < n:
            running.append(study.ask(dists))
        t = running.pop(0)
        values, starts = _toy(t.params)
        t.set_user_attr("flags", dict(t.params))
        t.set_constraint("starts", 0.0 if starts else 1.0)
        if not starts:
            t.set_user_attr("outcome", "infeasible")
        elif spread is not None:
            t.set_user_attr("spread", spread)
        if starts and server is not None:
            t.set_user_attr("server", server(t.params))
        if starts and metrics is not None:
            t.set_user_attr("metrics", metrics(values))
        study.tell(t, values if starts else [0.0, 1000.0])
    return study


def test_after_the_baselines_come_the_low_latency_probes_jittered_by_the_seed(space):
    firsts = []
    for seed in (0, 1):
        study = _run(space, seed, len(baselines(space)) + len(PROBES))
        default = next(t.params for t in study.trials if t.user_attrs.get("baseline") == "default")
        probes = [t for t in study.trials if t.system_attrs.get(MOVE, {}).get("kind") == "probe"]
        # every probe but four times the sequences: the default's are the space's top
        assert default["max_num_seqs"] == space.distributions()["max_num_seqs"].high
        assert [t.system_attrs[MOVE]["probe"] for t in probes] == list(range(len(PROBES) - 1))
        mirror = probes[PROBES.index({"max_num_batched_tokens": 4.0})].params
        assert mirror["max_num_batched_tokens"] > 2 * default["max_num_batched_tokens"] or \
            mirror["max_num_batched_tokens"] == space.distributions()["max_num_batched_tokens"].high
        corner = probes[0].params  # an eighth of the budget and of the sequences, roughly
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            assert default[name] / 12 < corner[name] < default[name] / 5
        firsts.append(corner)
    assert firsts[0] != firsts[1]  # seeds run different trajectories


def test_the_model_proposes_distinct_configurations_and_learns_what_does_not_start(space):
    refused = late = 0
    for seed in range(5):  # one seed's half a study is a few trials: pooled over five
        study = _run(space, seed, 30)
        model = [t for t in study.trials if t.system_attrs.get(MOVE, {}).get("kind") == "model"]
        assert len(model) >= 15
        keys = {tuple(sorted(t.params.items())) for t in study.trials}
        assert len(keys) == len(study.trials)  # never the same configuration twice
        second_half = model[len(model) // 2:]
        refused += sum(t.params["gpu_memory_utilization"] < 0.6 for t in second_half)
        late += len(second_half)
    assert refused <= late // 5, (refused, late)  # random would refuse about a quarter


def test_parallel_workers_get_distinct_model_based_proposals(space):
    study = _run(space, 0, 26, workers=4)
    model = [t for t in study.trials if t.system_attrs.get(MOVE, {}).get("kind") == "model"]
    assert len(model) >= 15  # no fallback to another sampler while trials are in flight
    keys = {tuple(sorted(t.params.items())) for t in study.trials}
    assert len(keys) == len(study.trials)


def test_the_surrogate_interpolates_and_learns_an_inert_dimension():
    rng = np.random.default_rng(0)
    X = rng.random((25, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1]  # the third coordinate does nothing
    gp = fit(X, y)
    test = rng.random((50, 3))
    mu, sd = gp.predict(test)
    truth = np.sin(3 * test[:, 0]) + test[:, 1]
    assert np.abs(mu - truth).mean() < 0.1 * truth.std() * 3  # well inside the spread
    assert gp.lengths[2] > 3 * max(gp.lengths[0], gp.lengths[1])
    mu_seen, sd_seen = gp.predict(X)
    assert sd_seen.max() < sd.mean()


def test_a_cell_of_its_own_where_a_mode_switch_changes_the_response():
    # dimension 0 a mode switch (0/1); the budget (dimension 1) is steep on one side (16
    # trials) and does nothing on the other (4 trials), as a chunked budget and one that
    # holds a whole prompt: the plain process carries the steep side's shape across
    rng = np.random.default_rng(0)
    X = np.concatenate([np.stack([np.ones(16), rng.random(16)], 1),
                        np.stack([np.zeros(4), np.linspace(0.05, 0.95, 4)], 1)])
    y = np.where(X[:, 0] == 1.0, np.sin(8 * X[:, 1]), 0.0)
    plain = fit(X, y)
    cells = fit(X, y, cells=np.array([True, False]))
    assert plain.kernel.share == 0.0 and cells.kernel.share > 0.0
    flat = np.stack([np.zeros(40), np.linspace(0, 1, 40)], 1)
    assert np.abs(plain.predict(flat)[0]).max() > 0.1
    assert np.abs(cells.predict(flat)[0]).max() < 0.05  # learnt flat between its trials
    steep = np.stack([np.ones(40), np.linspace(0, 1, 40)], 1)
    assert np.abs(cells.predict(steep)[0] - np.sin(8 * steep[:, 1])).mean() < 0.05
    assert np.allclose(cells.kernel(X, X).diagonal(), 1.0)  # still a unit prior variance


def test_one_cell_only_is_the_plain_process():
    rng = np.random.default_rng(2)
    X = np.stack([np.zeros(10), rng.random(10)], 1)
    y = np.sin(3 * X[:, 1])
    a, b = fit(X, y), fit(X, y, cells=np.array([True, False]))
    assert b.kernel.share == 0.0 and np.allclose(a.lengths, b.lengths)


def test_the_encoding_round_trips_the_space(space):
    enc = Encoding(space.distributions())
    default = next(b for b in baselines(space) if b.name == "default")
    params = {p.name: default.flags[p.name] for p in space.params}
    assert enc.decode(enc.encode(params)) == params
    assert ((enc.encode(params) >= 0) & (enc.encode(params) <= 1)).all()


def test_auto_is_the_front_sampler():
    assert isinstance(make_sampler("auto", 0), FrontSampler)
    assert isinstance(make_sampler("front", 0, front=SETTINGS), FrontSampler)


def test_a_cap_the_engine_never_reached_is_not_moved_again(space):
    """Forty-eight clients: more sequences than that never run, and the engine's report says
    so; a configuration that only moves such a cap counts as measured."""
    clients = 48

    def report(p):
        return {"running_peak": float(min(p["max_num_seqs"], clients)),
                "kv_cache_usage_peak": 0.99, "preemptions": 0.0}
    study = _run(space, 0, 24, server=report)
    dists = space.distributions()
    trials = [t for t in study.get_trials(deepcopy=False) if set(dists) <= set(t.params)]
    echoes = 0
    for i, t in enumerate(trials):
        h = history(SETTINGS, trials[:i], study.directions, dists)
        echoes += len(h.echoes)
        if t.system_attrs.get(MOVE, {}).get("kind") == "model":
            assert fresh(h, SETTINGS, h.enc.encode(t.params)[None])[0], t.params
    assert echoes > 0
    h = history(SETTINGS, trials, study.directions, dists)
    top = next(x for i, x in h.echoes
               if h.measured[i].params["max_num_seqs"] < dists["max_num_seqs"].high)
    assert not fresh(h, SETTINGS, top[None])[0]


def test_the_noise_floor_is_the_spread_of_the_trials_confirmation_runs(space):
    spread = {"n": 3, "median": 100.0, "min": 96.0, "max": 104.0}  # 8% of the median
    study = _run(space, 0, len(baselines(space)) + 2, spread={"output_throughput": spread})
    dists = space.distributions()
    trials = [t for t in study.get_trials(deepcopy=False) if set(dists) <= set(t.params)]
    h = history(SETTINGS, trials, study.directions, dists)
    assert measured_spread(h, SETTINGS) == pytest.approx([0.08, 0.0])


def test_without_confirmation_runs_the_noise_floor_is_the_trials_own_intervals(space):
    """A ladder's capacity comes with its 95 % interval: width / 3.92 / value is its
    relative sd, and the model's floor is the median of them."""
    def metrics(values):  # an interval of +-7.84 % of the value: a relative sd of 4 %
        v = values[0]
        return {"output_throughput": v, "output_throughput_lower": v * (1 - 0.0784),
                "output_throughput_upper": v * (1 + 0.0784)}
    study = _run(space, 0, len(baselines(space)) + 2, metrics=metrics)
    dists = space.distributions()
    trials = [t for t in study.get_trials(deepcopy=False) if set(dists) <= set(t.params)]
    h = history(SETTINGS, trials, study.directions, dists)
    assert measured_spread(h, SETTINGS) == pytest.approx([0.04, 0.0])


def _article_space(study_file, rules):
    return build_space(load_study_file(study_file(
        f'[model]\npath = "models/llama3-8b"\n[space]\nrules = "{rules}"\n')))


def _prefix_costs(p):
    """The toy, where prefix caching halves the throughput."""
    (thr, itl), starts = _toy(p)
    return [thr / 2 if p["enable_prefix_caching"] else thr, itl], starts


def _unchunked_costs(p):
    """The toy, where running without chunked prefill halves the throughput and doubles
    the ITL."""
    (thr, itl), starts = _toy(p)
    return ([thr, itl] if p["enable_chunked_prefill"] else [thr / 2, itl * 2]), starts


@pytest.mark.parametrize("rules, toy, parents", [("article", _toy, 2), ("vllm-v1", _toy, 2),
                                                 ("article", _prefix_costs, 1),
                                                 ("vllm-v1", _unchunked_costs, 1)])
def test_probes_also_run_from_the_baseline_in_a_regime_the_defaults_probes_never_reach(
        study_file, rules, toy, parents):
    """The default's probes keep its categorical flags. The article's rules turn its prefix
    caching off (it runs with chunked prefill), so they never use prefix caching; the
    probes then also move from the article's launch without chunked prefill, which keeps
    it, unless a trial without prefix caching already beats that launch on both
    objectives. vLLM's own rules take nothing from the default, but its probes never leave
    chunked prefill, a mode switch (``Param.mode``): they also move from that launch,
    unless a chunked trial (the default's included) already beats it."""
    space = _article_space(study_file, rules)
    settings = FrontSettings.for_study(load_study_file(study_file(
        f'[model]\npath = "models/llama3-8b"\n[space]\nrules = "{rules}"\n')), space)
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=FrontSampler(settings, seed=0))
    warm_start(study, space)
    dists = space.distributions()
    for _ in range(len(baselines(space)) + parents * len(PROBES)):
        t = study.ask(dists)
        flags = dict(t.params) if t.user_attrs.get("baseline") else settings.repair(t.params)
        values, starts = toy(flags)  # what the runner runs: the rules' repair
        t.set_user_attr("flags", flags)
        t.set_constraint("starts", 0.0)
        study.tell(t, values)
    probes = [t.system_attrs[MOVE] for t in study.trials
              if t.system_attrs.get(MOVE, {}).get("kind") == "probe"]
    by_parent = {m["parent"] for m in probes}
    article = next(t.number for t in study.trials if t.user_attrs.get("baseline") == "article")
    assert len(by_parent) == parents
    assert (article in by_parent) == (parents == 2)


def test_a_candidate_fully_correlated_with_a_front_point_draws_its_value():
    z_f = np.random.default_rng(0).standard_normal((64, 1))
    z_c = np.random.default_rng(1).standard_normal((64, 1))
    # candidate 0 is the front point itself, candidate 1 is independent of it
    front, cands = joint_draws(np.array([1.0]), np.array([[0.5]]), np.array([1.0, 1.0]),
                               np.array([[0.5, 0.0]]), np.array([0.5, 0.5]), z_f, z_c)
    assert np.allclose(cands[:, 0], front[:, 0], atol=1e-4)  # up to the jitter
    assert np.std(cands[:, 1] - front[:, 0]) > 0.5


def test_re_measuring_a_noisy_front_point_gains_nothing():
    # a noisy one-flag trade-off (both objectives grow with the flag), measured 12 times;
    # the candidate: the measured configuration of the front's best throughput
    rng = np.random.default_rng(0)
    X = rng.random((12, 1))
    logs = np.stack([np.log(1000 + 200 * X[:, 0]), np.log(20 + 30 * X[:, 0])], 1)
    logs += 0.05 * rng.standard_normal(logs.shape)
    gps = [fit(X, logs[:, j]) for j in range(2)]
    assert min(gp.noise_sd for gp in gps) > 0.01  # the processes learned the noise
    objs = Objectives(tuple(gps), (0.0, 0.0), np.array([True, False]))
    cand, ref = X[[np.argmax(logs[:, 0])]], np.array([-500.0, 200.0])
    preds = [gp.predict(cand) for gp in gps]
    fronts, draws = posterior_draws(objs, X, cand, preds, 64, rng)
    joint = expected_improvement(draws, fronts, ref)[0]
    # drawn apart from the front at its measured values, the same candidate seemed to gain
    mean, sd = (np.stack([gp.predict(cand)[i] for gp in gps], 1) for i in (0, 1))
    apart = objs.minimised(mean + sd * np.random.default_rng(1).standard_normal((64, 1, 2)))
    measured = objs.minimised(logs)
    apart = expected_improvement(apart, np.repeat(measured[None], 64, 0), ref)[0]
    assert apart > 1.0 and joint < 1e-3 * apart  # nothing but the Cholesky jitter


def _copy(study):
    """A new study with ``study``'s trials, in order, as they were stored (parameters,
    values, constraints, attributes): the same history as running ``_run`` again."""
    copy = optuna.create_study(directions=study.directions)
    copy.add_trials(study.trials)
    return copy


def _proposal(study, space, seed):
    study.sampler = FrontSampler(SETTINGS, seed=seed)
    return optuna_adapter.stored_trial(study, study.ask(space.distributions()))


def test_a_proposal_another_worker_is_still_asking_is_not_proposed_again(space):
    """Two workers asking at once: one's trial is RUNNING with its move written but its
    parameters not yet (Optuna writes them after the sampler returns). The other, asking
    then, must not propose the same configuration (the race behind two workers running
    the same flags side by side)."""
    enc = Encoding(space.distributions())
    checked = 0
    for n in (20, 21):
        ran = _run(space, 0, n)
        alone = _copy(ran)
        for seed in range(20, 24):
            first = _proposal(alone, space, seed)
            alone.tell(first.number, state=optuna.trial.TrialState.FAIL)
            if first.system_attrs[MOVE]["kind"] != "model":
                continue
            study = _copy(ran)
            asking = optuna_adapter.stored_trial(study, study.ask())  # no parameters yet
            optuna_adapter.set_trial_system_attr(study, asking, MOVE, dict(
                first.system_attrs[MOVE], params=dict(first.params)))
            again = _proposal(study, space, seed)
            gap = np.abs(np.array(enc.encode(again.params)) - np.array(enc.encode(first.params)))
            cat = enc.categorical()
            assert (gap[~cat] >= SETTINGS.near).any() or (gap[cat] > 0).any(), (n, seed)
            checked += 1
    assert checked >= 4  # the model proposed in most of these


def test_the_move_keeps_the_proposed_parameters(space):
    study = _run(space, 0, 16)
    moves = [t for t in study.trials if MOVE in t.system_attrs]
    assert len(moves) >= 8
    assert all(t.system_attrs[MOVE]["params"] == t.params for t in moves)

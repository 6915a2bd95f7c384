"""The search benchmark's harness follows the runner's trial behaviour (a stand-in truth,
not the simulator): refused configurations cost a trial, duplicates do not."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from search_compile import hits, table  # noqa: E402
from search_report import curve, reach, repeats  # noqa: E402
from search_run import Contender, run_one  # noqa: E402
from search_truth import load_profile  # noqa: E402

from contenders.plan import SearchPlan  # noqa: E402


class StandIn:
    """Starts when gpu_memory_utilization >= 0.7; throughput and ITL from two flags."""

    def __init__(self):
        self.calls = 0

    def outcome(self, flags):
        self.calls += 1
        if flags["gpu_memory_utilization"] < 0.7:
            return {"started": False, "failure": "no_kv_memory", "output_throughput": 0.0,
                    "p99_itl_ms": None, "p99_ttft_ms": None}
        t = float(flags["max_num_batched_tokens"])
        return {"started": True, "failure": None, "output_throughput": 1000 + math.log(t),
                "p99_itl_ms": 10 + t / 1000, "p99_ttft_ms": 100.0}


def test_refusals_cost_a_trial_and_duplicates_do_not():
    profile = load_profile("chat-shared-prefix-h200", "article")
    run = run_one(profile, StandIn(), Contender("r", SearchPlan("random")), seed=3, n_trials=30)
    assert len(run["outcomes"]) == 30 and len(run["points"]) == 30
    assert "infeasible" in run["outcomes"]  # gpu_memory_utilization below 0.7 half the time
    assert all((p is None) == (o != "measured") for p, o in zip(run["points"], run["outcomes"]))
    assert "duplicate" not in run["outcomes"]


def test_autotune_grid_runs_its_grid_once_and_repeats_are_free():
    profile = load_profile("llama3-8b-h200", "article")
    truth = StandIn()
    run = run_one(profile, truth, Contender("g", None), seed=0, n_trials=40)
    # max_num_seqs above the token budget is repaired down: those repeat measured points
    assert run["duplicates"] > 0 and run["stopped"] == "grid exhausted"
    assert len(run["outcomes"]) + run["duplicates"] == 40


def test_each_launch_records_its_compile_key_and_repeats_are_counted():
    import dataclasses

    from tuner.space.compile_grid import compile_grids

    profile = load_profile("llama3-8b-h200", "article")  # with the compile grid on
    space = dataclasses.replace(profile.space, grids=compile_grids(profile.space))
    profile = dataclasses.replace(profile, space=space)
    run = run_one(profile, StandIn(), Contender("r", SearchPlan("random")), seed=3, n_trials=12)
    launched = [o for o in run["outcomes"] if o != "infeasible"]
    assert len(run["launches"]) == len(launched)
    for budget, seqs, key in run["launches"]:
        assert budget in profile.space.grids["max_num_batched_tokens"]
        assert key is None or key[0] == budget
    a, b = ["k", 1], ["k", 2]
    # eager starts compile nothing; the third start repeats the first's pair and key; the
    # second run on the same box hits the keys the first compiled
    first = [[2048, 256, a], [1024, 8, None], [2048, 256, a], [4096, 256, b]]
    box: set = set()
    assert hits(first, box) == (3, 1, 1, 1)
    assert hits([[4096, 256, b], [8192, 64, ["k", 3]]], box) == (2, 0, 0, 1)
    data = {"runs": [{"contender": "c", "profile": "p", "rules": "r", "seed": s,
                      "launches": launches} for s, launches in
                     ((1, [[4096, 256, b]]), (0, first))]}
    assert table(data)[-1] == "| c | p | r | 2 | 4 | 1 | 1 (25%) | 2 (50%) |"


def test_parallel_workers_keep_the_budget():
    profile = load_profile("llama3-8b-h200", "vllm-v1")
    c = Contender("x4", SearchPlan("tpe", n_startup_trials=4, warm_start=True), workers=4)
    run = run_one(profile, StandIn(), c, seed=1, n_trials=12)
    assert len(run["outcomes"]) == 12


def test_hypervolume_curve_and_trials_to_reach():
    run = {"points": [None, [2.0, 5.0], [3.0, 4.0]]}
    c = curve(run, reference=[1.0, 6.0], total=4.0, trials=5)  # (3, 4) dominates: 2 x 2
    assert c[0] == 0 and math.isclose(c[1], 0.25) and c[-1] == c[2] and math.isclose(c[2], 1.0)
    assert reach(c, 0.95, 5) == 3 and math.isinf(reach(c[:2], 0.95, 2))


def test_acceptance_gives_a_lower_bound_when_random_never_gets_there():
    from search_report import acceptance

    def row(name, to90, to95, limit=24, hv20=0.96, held_out=False):
        return {"profile": "p", "rules": "r", "contender": name, "to90": to90, "to95": to95,
                "wasted_after10": 0.05, "limit": limit, "hv20": hv20, "hvlast": 0.97,
                "held_out": held_out}

    lines = acceptance([row("auto", 10.0, 18.0), row("random-60", math.inf, math.inf, 60)],
                       "auto")
    assert lines[-1] == "| p | r | 0.960 | 18 | - | 10 / >60 (> 6.0) | 5% | - |"
    lines = acceptance([row("auto", 10.0, 18.0), row("random-60", 35.0, math.inf, 60),
                        row("auto 5% noise", 12.0, math.inf, hv20=0.91),
                        row("auto x4", 12.0, math.inf)], "auto")
    assert lines[-1] == "| p | r | 0.960 | 18 | 0.910 | 10 / 35 (3.5) | 5% | 0.970 |"
    # a held-out profile is marked and listed after the others
    lines = acceptance([row("auto", 10.0, 18.0, held_out=True),
                        {**row("auto", 30.0, math.inf), "profile": "a"}], "auto")
    assert lines[-2].startswith("| a | r |") and lines[-1].startswith("| p (held out) | r |")
    assert "| >24 |" in lines[-2]


def test_the_outcome_cache_is_keyed_by_the_simulators_source(tmp_path, monkeypatch):
    import search_truth

    (tmp_path / "tuner" / "sim").mkdir(parents=True)
    (tmp_path / "tuner" / "space").mkdir()
    source = tmp_path / "tuner" / "sim" / "steptime.py"
    source.write_text("BANDWIDTH = 1\n")
    (tmp_path / "tuner" / "space" / "defaults.py").write_text("GPU_MEMORY_UTILIZATION = 0.92\n")
    monkeypatch.setattr(search_truth, "ROOT", tmp_path)
    before = search_truth.model_version()
    source.write_text("BANDWIDTH = 2\n")
    assert search_truth.model_version() != before


def test_the_cache_key_ignores_docstrings_and_comments_but_not_values(tmp_path, monkeypatch):
    import search_truth

    (tmp_path / "tuner" / "sim").mkdir(parents=True)
    (tmp_path / "tuner" / "space").mkdir()
    source = tmp_path / "tuner" / "sim" / "steptime.py"
    toml = tmp_path / "tuner" / "sim" / "profiles.toml"
    source.write_text('"""Step time."""\n\ndef f(x):\n    """Twice x."""\n    return 2 * x\n')
    toml.write_text('# constants\n[engine]\na = { value = 1.0, source = "measured" }\n')
    (tmp_path / "tuner" / "space" / "defaults.py").write_text("GPU_MEMORY_UTILIZATION = 0.92\n")
    monkeypatch.setattr(search_truth, "ROOT", tmp_path)
    before = search_truth.model_version()

    source.write_text('"""Step time (pure)."""\n\n\ndef f(x):  # why\n    return 2 * x\n')
    toml.write_text('# engine constants, edited\n[engine]\na = { value = 1.0, source = "measured" }\n')
    assert search_truth.model_version() == before

    toml.write_text('[engine]\na = { value = 1.5, source = "measured" }\n')
    assert search_truth.model_version() != before
    toml.write_text('[engine]\na = { value = 1.0, source = "measured" }\n')
    source.write_text('def f(x):\n    """Twice x."""\n    return 3 * x\n')
    assert search_truth.model_version() != before


def test_repeats_count_measured_values_seen_before():
    assert repeats([[100.0, 5.0], None, [100.0, 5.0], [100.0, 6.0], [100.0, 5.0], None]) == 2
    assert repeats([None, None]) == 0


def test_compared_runs_keep_their_labels_and_share_one_set_of_fronts():
    from search_compare import pooled
    run = {"profile": "p", "rules": "article", "contender": "front", "seed": 0, "points": []}
    a = {"contenders": [{"name": "front"}], "runs": [dict(run)], "fronts": {"p/article": {"x": 1}}}
    b = {"contenders": [{"name": "front"}], "runs": [dict(run, seed=1)],
         "fronts": {"p/article": {"x": 2}, "q/article": {"x": 3}}}
    out = pooled([("a", a), ("b", b)])
    assert [c["name"] for c in out["contenders"]] == ["a:front", "b:front"]
    assert sorted((r["contender"], r["seed"]) for r in out["runs"]) == [("a:front", 0),
                                                                       ("b:front", 1)]
    assert set(out["fronts"]) == {"p/article", "q/article"}  # one entry per pair, recomputed
    assert a["runs"][0]["contender"] == "front"  # the inputs are left as they were


def test_a_variant_is_compared_seed_by_seed_with_an_interval():
    from search_compare import paired_interval
    base = {s: 0.90 + 0.01 * s for s in range(10)}
    same = paired_interval(base, dict(base))
    assert same == (0.0, 0.0, 0.0, 10)  # the same runs: no difference, no spread
    up = paired_interval(base, {s: v + 0.02 for s, v in base.items()})
    assert up[0] == pytest.approx(0.02) and up[1] > 0  # a shift on every seed: outside 0
    noisy = {s: v + (0.05 if s % 2 else -0.05) for s, v in base.items()}
    d, low, high, n = paired_interval(base, noisy)
    assert low < 0 < high and n == 10  # seeds moving both ways: inside the spread
    assert paired_interval(base, {20: 1.0})[3] == 0  # no seed in common


def test_two_runs_are_the_same_when_every_point_is_whatever_the_timings():
    from search_same import differences

    run = {"profile": "p", "rules": "r", "contender": "front", "seed": 0,
           "points": [[100.0, 20.0], None], "outcomes": ["measured", "infeasible"],
           "wall_s": 1.0, "ask_ms": [3.0]}
    slower = dict(run, wall_s=9.0, ask_ms=[7.0])
    moved = dict(run, points=[[100.0, 21.0], None])
    assert differences({"runs": [run]}, {"runs": [slower]}) == []
    assert differences({"runs": [run]}, {"runs": [moved]}) == ["p/r/front/0: points differ"]
    assert differences({"runs": [run]}, {"runs": []}) == ["p/r/front/0: only in the first"]


def test_a_rule_switched_off_changes_what_the_front_sampler_proposes():
    from contenders.plan import PLANS

    profile = load_profile("llama3-8b-h200", "vllm-v1")
    on = run_one(profile, StandIn(), Contender("front", PLANS["auto"]), seed=0, n_trials=16)
    off = run_one(profile, StandIn(), Contender("-end_pushes", PLANS["auto"],
                                                settings=(("end_pushes", False),)),
                  seed=0, n_trials=16)
    assert any(m.startswith("model:end") for m in on["moves"])
    assert any(m.startswith("model") for m in off["moves"])
    assert not any(m.startswith("model:end") for m in off["moves"])


def test_the_ablation_flags_a_rule_whose_cost_stays_inside_the_seeds_spread():
    from search_ablation import contenders, verdicts

    hv = {("p", "r", "front"): [0.90, 0.95, 1.00],  # spread 0.10
          ("p", "r", "-cheap"): [0.88, 0.93, 0.99],  # costs 0.02
          ("p", "r", "-dear"): [0.70, 0.75, 0.80]}  # costs 0.20
    assert verdicts(hv, "front", "-cheap", [("p", "r")])["candidate"]
    assert not verdicts(hv, "front", "-dear", [("p", "r")])["candidate"]
    names = [c.name for c in contenders(["box_cox", "believer"])]
    assert names == ["front", "-box_cox", "front x4", "-believer x4"]

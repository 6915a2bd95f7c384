"""The default sampler with a worker, on a simulated study of one, two and three
objectives (issue 43): the worker's loop in one process on the simulator's engine core
offline (``tuner.testing.sim_bench``), real SQLite storage, 20 trials. Moved from the
integration tier (decision 0049): the claims are the sampler's moves as the worker asks
and tells them, not the processes. After the baselines every trial is the sampler's own
move (a probe, then the model's), never Optuna's random fallback, and the model aims at
what the count of objectives calls for: expected improvement for one, hypervolume for
two and three."""

from __future__ import annotations

import pytest
from optuna.trial import TrialState

from tuner.search.front import MOVE
from tuner.storage import create_study, load_study_file
from tuner.testing.sim_bench import run_in_process
from tuner.testing.sim_studies import trials_of

TRIALS = 20
# a small workload (the client's lag and the time scale do not apply offline)
SIM = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 64
output_len = 16
max_concurrency = 4
num_requests = 16
warmup_requests = 0
max_client_lag_ms = 10000
min_gap_share = 0.0
[slo]
p99_itl_ms = 200
[search]
n_trials = {trials}
{objectives}
[engine]
kind = "sim"
time_scale = 10
start_timeout_s = 60
'''
OBJECTIVES = (("output_throughput", "maximize"), ("p99_itl_ms", "minimize"),
              ("p99_ttft_ms", "minimize"))
# what the model's moves aim at, by the count of objectives (tuner.search.front.acquisition)
AIMS = {1: {"ei"}, 2: {"ehvi", "end:0", "end:1"}, 3: {"ehvi", "end:0", "end:1", "end:2"}}


def _objectives(count: int) -> str:
    return "".join(f'[[objectives]]\nmetric = "{m}"\ndirection = "{d}"\n'
                   for m, d in OBJECTIVES[:count])


@pytest.mark.parametrize("count", [1, 2, 3])
def test_a_study_of_each_count_of_objectives_runs_on_the_samplers_own_moves(
        count, study_file, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/s.db"
    text = SIM.format(trials=TRIALS, objectives=_objectives(count))
    spec = load_study_file(study_file(text, "obj.toml"))
    assert len(spec.objectives) == count and spec.search.sampler == "auto"
    create_study(spec, url)
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    summary, said = run_in_process("obj", url, tmp_path)
    assert "budget" in summary.reason, said[-3000:]

    trials = sorted(trials_of("obj", url), key=lambda t: t.number)
    assert len(trials) == TRIALS and all(t.state == TrialState.COMPLETE for t in trials)
    baselines = [t for t in trials if "baseline" in t.user_attrs]
    sampled = [t for t in trials if "baseline" not in t.user_attrs]
    assert baselines and len(sampled) == TRIALS - len(baselines)
    without = [t.number for t in sampled if MOVE not in t.system_attrs]
    assert without == []  # no trial fell back to random sampling
    kinds = [t.system_attrs[MOVE]["kind"] for t in sampled]
    assert set(kinds) <= {"probe", "model"} and "probe" in kinds
    model = [t.system_attrs[MOVE] for t in sampled if t.system_attrs[MOVE]["kind"] == "model"]
    assert len(model) >= 5, kinds  # after the baselines and the probes, the model
    aims = {m["aim"] for m in model}
    assert aims <= AIMS[count] and ("ehvi" in aims or "ei" in aims), aims
    told = [t for t in trials if t.values is not None]
    assert all(len(t.values) == count for t in told)

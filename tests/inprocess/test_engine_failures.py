"""What the worker does with an engine that fails, in one process
(``tuner.testing.sim_bench``): a refused start is an infeasible trial at the study's
worst point, a crash during the benchmark a failed one, and the worker goes on. The same
cases on real processes (a SIGKILLed server, a refusal read from its exit) are
tests/integration/test_worker_sim.py's."""

from __future__ import annotations

from optuna.trial import TrialState

from tuner.storage import create_study, load_study_file
from tuner.testing.sim_bench import InProcessSim, run_in_process
from tuner.testing.sim_studies import SIM, sim_study, trials_of
from tuner.trials import record


def test_a_crash_during_the_benchmark_fails_the_trial_and_the_next_runs(study_file, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    url = f"sqlite:///{tmp_path}/t.db"
    sim_study(study_file, url, name="k", n=16, trials=2)
    sim = InProcessSim()
    sim.fail_next("crash")
    summary, said = run_in_process("k", url, tmp_path, sim)
    first, second = sorted(trials_of("k", url), key=lambda t: t.number)[:2]
    assert first.state == TrialState.FAIL, said[-2000:]
    assert first.user_attrs["failure"]["class"] == "crash-during-benchmark"
    assert "code 137" in first.user_attrs["failure"]["message"]
    assert second.state == TrialState.COMPLETE
    assert all(e.stopped for e in sim.engines)  # every engine started was stopped
    assert "budget of 2 trials is spent" in summary.reason


def test_a_refused_start_is_infeasible_at_the_studys_worst_point(study_file, tmp_path,
                                                                monkeypatch):
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    url = f"sqlite:///{tmp_path}/t.db"
    # the 70B shape's weights load on one H200, but at 50% memory nothing is left for the
    # KV cache: the engine refuses to start, as vLLM does
    extra = '\n[space]\nfixed = { gpu_memory_utilization = 0.5 }\n'
    path = study_file(SIM.format(n=16, trials=1, scale=1).replace("llama3-8b", "llama3-70b")
                      + extra, "oom.toml")
    spec = load_study_file(path)
    create_study(spec.model_copy(update={"search": spec.search.model_copy(
        update={"baselines": False})}), url)
    run_in_process("oom", url, tmp_path)
    (t,) = trials_of("oom", url)
    assert t.state == TrialState.COMPLETE and t.user_attrs["outcome"] == record.INFEASIBLE
    assert t.constraints["starts"] == 1.0
    assert t.user_attrs["failure"]["class"] == "kv-cache-too-small"
    assert "No available memory for the cache blocks" in t.user_attrs["failure"]["log_tail"]
    assert t.values == [0.0, 200.0]  # the study's worst acceptable point

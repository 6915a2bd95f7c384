"""The worker's budget as stored, read before each trial, in one process
(``tuner.testing.sim_bench``). Moved from tests/integration/test_worker_sim.py (decision
0049), where a slow simulator had to outlast a `tuner study create` run beside it; here
the budget is raised while the first trial measures, at a point the test chooses."""

from __future__ import annotations

from optuna.trial import TrialState

from tuner.storage import create_study
from tuner.testing.sim_bench import InProcessSim, run_in_process
from tuner.testing.sim_studies import sim_study, trials_of


def test_a_running_worker_honours_a_budget_raised_meanwhile(storage_url, study_file,
                                                            tmp_path, monkeypatch):
    """`tuner study create` may raise a stored study's budget while its workers run; a
    running worker reads the stored budget before each trial, so it runs the new one."""
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    spec = sim_study(study_file, storage_url, name="raise", trials=1)
    raised = spec.model_copy(update={"search": spec.search.model_copy(
        update={"n_trials": 2})})

    def during(run: int) -> None:
        if run == 0:  # the first trial's benchmark: the budget is raised meanwhile
            create_study(raised, storage_url)

    summary, said = run_in_process("raise", storage_url, tmp_path, InProcessSim(on_run=during))
    done = [t for t in trials_of("raise", storage_url) if t.state == TrialState.COMPLETE]
    assert len(done) == 2, said[-2000:]
    assert "budget of 2 trials is spent" in summary.reason

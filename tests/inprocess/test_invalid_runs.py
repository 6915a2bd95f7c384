"""A worker whose every run measured the client, not the server (issue 63, items 4 and
5), in one process: the simulator's engine core offline (``tuner.testing.sim_bench``, its
runs scripted as a lagging client) and a scripted clock. Moved from the integration tier
(test_trial_count.py, test_baseline_again.py; decision 0049): what they claimed is
about the loop's bookkeeping, not about the client's lag, which
tests/integration/test_invalid_measurement.py still measures on a real client."""

from __future__ import annotations

import io

from tuner.runner.decide import MAX_INVALID_IN_A_ROW
from tuner.runner.measure import INVALID_PAUSE_S, INVALID_RETRIES
from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.clock import FakeClock
from tuner.testing.sim_bench import InProcessSim, in_process_worker
from tuner.testing.sim_studies import SIM
from tuner.trials import queries, record
from tuner.trials.parts import FailureKind


def _worker(study_file, tmp_path, monkeypatch, text, name, **kw):
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    url = f"sqlite:///{tmp_path}/t.db"
    create_study(load_study_file(study_file(text, f"{name}.toml")), url)
    clock, said = FakeClock(), io.StringIO()
    worker = in_process_worker(name, url, tmp_path, InProcessSim(lagging=True), clock,
                               stream=said, **kw)
    return url, worker, clock, said


def test_invalid_measurements_spend_none_of_a_workers_n_trials(study_file, tmp_path,
                                                               monkeypatch):
    """Trials were counted three ways: `tuner status` and ``[n/N]`` counted those that
    spend the budget, `tuner worker --n-trials` every one launched. All count what
    ``queries.spends_budget`` says now."""
    text = SIM.format(n=8, trials=20, scale=1)
    url, worker, clock, _ = _worker(study_file, tmp_path, monkeypatch, text, "n", n_trials=1)
    summary = worker.run()
    records = [r for r in queries.load_records(open_study("n", url).study) if r.told]
    assert records and all(queries.measured_the_client(r) for r in records), records
    assert queries.counted(records) == 0  # what `tuner status` says was spent
    # so n_trials 1 was never reached: the worker stopped on the invalid runs instead
    assert len(records) == MAX_INVALID_IN_A_ROW
    assert "in a row measured the client" in summary.reason
    assert "spent its 1 trials" not in summary.reason
    # each trial ran again after a pause on the worker's clock, never the wall's
    assert clock.slept == [INVALID_PAUSE_S] * (INVALID_RETRIES * MAX_INVALID_IN_A_ROW)
    assert all(len(r.rejected_runs) == 1 + INVALID_RETRIES for r in records)


def test_a_worker_queues_the_default_again_after_a_starved_client(study_file, tmp_path,
                                                                 monkeypatch):
    """Baselines survive: vLLM's defaults are queued again after a run that measured
    its own client, as they were launched."""
    text = SIM.format(n=8, trials=20, scale=1)
    url, worker, _, said = _worker(study_file, tmp_path, monkeypatch, text, "s")
    worker.run()
    defaults = [r for r in queries.load_records(open_study("s", url).study)
                if r.baseline == record.DEFAULT_BASELINE]
    # baselines 0-2 queued at creation run first; the default again after each failure,
    # as it was launched: the worker stops after five invalid runs in a row (0 to 4)
    assert [(r.number, r.state) for r in defaults] == [
        (0, record.FAIL), (3, record.FAIL), (6, record.WAITING)], said.getvalue()[-2000:]
    assert all(r.failure.kind == FailureKind.INVALID_MEASUREMENT for r in defaults[:2])
    assert all(dict(r.flags) == dict(defaults[0].flags) for r in defaults)
    assert "queued the default baseline again (trial 0: invalid-measurement" in said.getvalue()

"""Seen in issue 63 (item 5): trials were counted three ways. `tuner status` ("spent") and
a worker's ``[n/N]`` counted the trials that spend the budget, while `tuner worker
--n-trials` counted every trial the worker launched, invalid measurements too. Now all
count what ``queries.spends_budget`` says (docs/studies.md, ``n_trials``). A real worker
on the simulator, whose every run measures the client (a lag limit no client meets)."""

from __future__ import annotations

import os

from tuner.runner.worker import MAX_INVALID_IN_A_ROW
from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.cli_fork import run_tuner
from tuner.testing.sim_studies import SIM
from tuner.trials import queries


def test_invalid_measurements_spend_none_of_a_workers_n_trials(study_file, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    text = SIM.format(n=8, trials=20, scale=4).replace("max_client_lag_ms = 50",
                                                       "max_client_lag_ms = 0.001")
    create_study(load_study_file(study_file(text, "n.toml")), url)
    out = run_tuner(["worker", "n", "--storage", url, "--gpus", "0", "--n-trials", "1"],
                    env={**os.environ, "TUNER_HOME": str(tmp_path)}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    records = [r for r in queries.load_records(open_study("n", url).study) if r.told]
    assert records and all(queries.measured_the_client(r) for r in records), records
    assert queries.counted(records) == 0  # what `tuner status` says was spent
    # so --n-trials 1 was never reached: the worker stopped on the invalid runs instead
    assert len(records) == MAX_INVALID_IN_A_ROW, out.stderr[-3000:]
    assert "in a row measured the client" in out.stderr, out.stderr[-3000:]
    assert "spent its 1 trials" not in out.stderr

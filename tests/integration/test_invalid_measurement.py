"""Seen case 7 of issue 20: a run the client could not measure (its lag over the limit)
was recorded as failed and spent a budget slot. Now it is run again on the same server
after a pause, and a trial that stays invalid spends no budget; a worker that measures only
its own client stops after a few in a row, saying why. A real worker on the simulator,
with a lag limit no client meets."""

from __future__ import annotations

import re

from optuna.trial import TrialState

from tuner.runner.measure import INVALID_RETRIES
from tuner.runner.worker import MAX_INVALID_IN_A_ROW
from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.worker_procs import start_worker
from tuner.trials.queries import counted, load_records

STUDY = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 32
output_len = 8
max_concurrency = 4
num_requests = 8
warmup_requests = 0
max_client_lag_ms = 0.000001
[search]
n_trials = 2
baselines = false
[engine]
kind = "sim"
time_scale = 100
start_timeout_s = 60
'''


def test_an_invalid_measurement_is_retried_and_spends_no_budget(study_file, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    create_study(load_study_file(study_file(STUDY)), url)
    log = tmp_path / "worker.log"
    proc = start_worker("s", url, env={"TUNER_HOME": str(tmp_path)}, log=log)
    assert proc.wait(timeout=300) == 0, log.read_text()[-2000:]
    study = open_study("s", url).study
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == MAX_INVALID_IN_A_ROW, log.read_text()[-2000:]
    for t in trials:
        assert t.state == TrialState.FAIL
        assert t.user_attrs["failure"]["class"] == "invalid-measurement"
        # run again on the same server first: every run is kept with its reason
        assert len(t.user_attrs["rejected_runs"]) == 1 + INVALID_RETRIES
    assert counted(load_records(study)) == 0  # the study's budget of 2 is untouched
    assert f"{MAX_INVALID_IN_A_ROW} trials in a row measured the client" in log.read_text()
    # the progress line says why it benchmarks again (issue 46, part 6)
    assert re.search(r"benchmark again \(the client was (the bottleneck|starved by other "
                     r"work on the machine): \w+_lag_p99_ms=", log.read_text()), log.read_text()

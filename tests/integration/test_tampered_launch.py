"""Seen case 2 of issue 47: a queued baseline's launch, rewritten in the database (the
dashboard's `POST /api/trials/N/user-attrs` did it), went on the next worker's command line
as stored: out of the catalogue's bounds, and lossy in a study that never opted in. Now a
worker checks a stored launch again before it starts anything. Real `tuner worker`
processes on the simulator, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys

import optuna

from tuner.storage import create_study, load_study_file
from tuner.trials import load_records, record

STUDY = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 64
output_len = 8
max_concurrency = 4
num_requests = 8
warmup_requests = 1
# the launch is this test's business, not the measurement: at this time scale the gaps
# between tokens are too short to see, and an invalid run is run again, twice, after a pause
max_client_lag_ms = 10000
min_gap_share = 0.0
[search]
n_trials = 2
[engine]
kind = "sim"
time_scale = 1000
start_timeout_s = 60
'''
# What the dashboard write stored on the queued default baseline.
TAMPERED = {"gpu_memory_utilization": 5, "kv_cache_dtype": "fp8", "max_num_seqs": 99999999}


def _baseline_trial(study: optuna.Study, name: str) -> optuna.trial.FrozenTrial:
    return next(t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("baseline")
                == name and t.state == optuna.trial.TrialState.WAITING)


def test_a_tampered_queued_baseline_starts_no_server(storage_url, study_file, tmp_path):
    create_study(load_study_file(study_file(STUDY)), storage_url)
    study = optuna.load_study(study_name="s", storage=storage_url)
    default = _baseline_trial(study, "default")
    study._storage.set_trial_user_attr(default._trial_id, "launch", TAMPERED)
    out = subprocess.run([sys.executable, "-m", "tuner", "worker", "s", "--storage",
                          storage_url, "--gpus", "0"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "TUNER_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    told = {r.baseline: r for r in load_records(study)}
    bad = told["default"]
    assert bad.state == "fail" and bad.outcome == record.FAILED, bad
    assert bad.failure.kind == "refused"
    assert "--gpu-memory-utilization 5" in bad.failure.message
    assert "\n" not in bad.failure.message
    assert not bad.command and not bad.log  # no server was started with it
    assert not list(tmp_path.rglob(f"trial-{bad.number:05d}.log"))
    # the untouched baseline after it still starts as given (how well the tiny workload
    # measures on a loaded machine is not this test's business)
    article = told["article"]
    assert article.failure is None or article.failure.kind != "refused", article.failure
    assert "--enforce-eager" in article.command and "--gpu-memory-utilization" in article.command

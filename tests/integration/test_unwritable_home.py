"""An unwritable ``$TUNER_HOME`` (issue 47, case 7): one line, before any trial is asked,
and no trial left RUNNING. A folder is blocked by a regular file of its name, which
refuses `mkdir` also to root."""

import os

import pytest
from optuna.trial import TrialState

from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.cli_fork import run_tuner

ENDS_WITHIN_S = 120

STUDY = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 256
output_len = 32
num_requests = 20
[slo]
p99_itl_ms = 200
[search]
n_trials = 2
[engine]
kind = "sim"
'''


def _tuner(*args, home):
    return run_tuner(args, timeout=ENDS_WITHIN_S, env={**os.environ, "TUNER_HOME": str(home)})


def _one_line(done) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return lines[-1]


@pytest.mark.parametrize("blocked", ["studies", "gpus"])
def test_worker_with_an_unwritable_home_folder_asks_no_trial(blocked, storage_url, study_file,
                                                             tmp_path):
    create_study(load_study_file(study_file(STUDY, "s.toml")), storage_url)
    home = tmp_path / "home"
    home.mkdir()
    (home / blocked).write_text("not a folder")
    line = _one_line(_tuner("worker", "s", "--storage", storage_url, home=home))
    assert line.startswith("tuner: error: cannot write ") and str(home / blocked) in line
    trials = open_study("s", storage_url).study.get_trials(deepcopy=False)
    assert not [t.number for t in trials if t.state == TrialState.RUNNING]
    assert [t.state for t in trials] == [TrialState.WAITING] * len(trials)  # the baselines


def test_study_create_in_an_unwritable_home_says_so_in_one_line(study_file, tmp_path):
    (tmp_path / "home").write_text("not a folder")
    home = tmp_path / "home" / "tuner"
    line = _one_line(_tuner("study", "create", study_file(STUDY, "s.toml"), home=home))
    assert line.startswith("tuner: error: cannot write the storage in ") and str(home) in line

"""Seen case 1 (second part) of issue 20: a sampler that raised inside `ask` left a RUNNING
trial with no heartbeat, which spent a budget slot for ever. Now the trial has the worker's
name and a heartbeat before the sampler runs, and a proposal that raises is told as failed:
the worker ends with one line (exit 1), and no trial is left running."""

from __future__ import annotations

import pytest
from optuna.samplers import RandomSampler
from optuna.trial import TrialState

from tuner.cli import main
from tuner.runner import worker as worker_module
from tuner.storage import create_study, load_study_file, open_study

STUDY = '''
[model]
path = "models/llama3-8b"
[search]
n_trials = 3
baselines = false
[engine]
kind = "sim"
time_scale = 1000
'''


class Boom(RandomSampler):
    def __init__(self, where: str) -> None:
        super().__init__(seed=0)
        self.where = where

    def before_trial(self, study, trial):
        if self.where == "before_trial":
            raise RuntimeError("sampler broke in before_trial")

    def sample_independent(self, study, trial, name, distribution):
        if self.where == "sample" and name == "max_num_seqs":
            raise TypeError("'<' not supported between instances of 'str' and 'int'")
        return super().sample_independent(study, trial, name, distribution)


@pytest.mark.parametrize("where", ["sample", "before_trial"])
def test_a_sampler_that_raises_leaves_no_running_trial(where, storage_url, study_file,
                                                       tmp_path, monkeypatch, capsys):
    create_study(load_study_file(study_file(STUDY)), storage_url)
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    monkeypatch.setattr(worker_module, "make_sampler", lambda *a, **k: Boom(where))
    code = main(["worker", "s", "--storage", storage_url, "--gpus", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1].startswith(
        "tuner: error: the sampler failed while proposing trial 0: "), err
    (trial,) = open_study("s", storage_url).study.get_trials(deepcopy=False)
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["outcome"] == "failed"
    assert trial.user_attrs["failure"]["class"] == "propose"
    assert trial.user_attrs["worker"]

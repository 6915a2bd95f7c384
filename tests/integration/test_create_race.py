"""Seen case 6 of issue 20: concurrent `tuner study create` of one study on PostgreSQL
crashed with KeyError: 'tuner.spec' or reported a half-written study. Now the study is
created, then marked ready, and the others wait for it: four real processes at once, three
times over, give one study, one "created" and three "exists, unchanged", and the three
baselines queued once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import optuna

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def test_concurrent_creates_give_one_study_and_one_answer_each(pg_admin, tmp_path):
    from tuner.testing.databases import fresh_postgres

    shutil.copytree(STUDIES / "models", tmp_path / "models")
    shutil.copy(STUDIES / "demo-sim.toml", tmp_path / "race.toml")
    for attempt in range(3):
        with fresh_postgres() as url:
            procs = [subprocess.Popen([sys.executable, "-m", "tuner", "study", "create",
                                       str(tmp_path / "race.toml"), "--storage", url],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=dict(os.environ))
                     for _ in range(4)]
            answers = [(p.wait(120), p.stdout.read(), p.stderr.read()) for p in procs]
            assert all(code == 0 and err == "" for code, _, err in answers), answers
            verbs = sorted("created" if " created in " in out else
                           "exists" if "exists, unchanged" in out else out
                           for _, out, _ in answers)
            assert verbs == ["created"] + ["exists"] * 3, (attempt, answers)
            assert all("3 baselines queued" in out for _, out, _ in answers), answers
            (summary,) = optuna.get_all_study_summaries(url)
            trials = optuna.load_study(study_name="race", storage=url).get_trials()
            assert summary.study_name == "race" and len(trials) == 3

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

from tuner.testing.worker_procs import wait_for

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


def test_many_concurrent_creates_on_a_fresh_sqlite_file(tmp_path):
    """Issue 47 case 10: 24 `study create` at once on a new SQLite file: 8 exited 1 with
    "UNIQUE constraint failed: alembic_version..." or "table studies already exists",
    SQLite's words for losing the race to create Optuna's tables. Now each one says
    "created" or "exists, unchanged", and exactly one says "created"."""
    shutil.copytree(STUDIES / "models", tmp_path / "models")
    shutil.copy(STUDIES / "demo-sim.toml", tmp_path / "race.toml")
    url = f"sqlite:///{tmp_path}/fresh.db"
    go, ready = tmp_path / "go", tmp_path / "ready"
    ready.mkdir()
    # Each process imports first, says so, then waits for the same signal: the creates meet
    # at the new file together (imports alone took each process a different time).
    start = ("import os, sys, time, pathlib, optuna, tuner.cli\n"
             f"(pathlib.Path({str(ready)!r}) / str(os.getpid())).touch()\n"
             f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.005)\n"
             "sys.exit(tuner.cli.main(sys.argv[1:]))")
    procs = [subprocess.Popen([sys.executable, "-c", start, "study", "create",
                               str(tmp_path / "race.toml"), "--storage", url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(24)]
    assert wait_for(lambda: len(list(ready.iterdir())) == len(procs), 300)
    go.touch()
    answers = [(p.wait(600), p.stdout.read(), p.stderr.read()) for p in procs]
    assert [a for a in answers if a[0] != 0 or a[2]] == []
    verbs = sorted("created" if " created in " in out else
                   "exists" if "exists, unchanged" in out else out for _, out, _ in answers)
    assert verbs == ["created"] + ["exists"] * 23, answers
    assert len(optuna.load_study(study_name="race", storage=url).get_trials()) == 3


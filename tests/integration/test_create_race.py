"""Seen case 6 of issue 20: concurrent `tuner study create` of one study on PostgreSQL
crashed with KeyError: 'tuner.spec' or reported a half-written study. Now the study is
created, then marked ready, and the others wait for it: four real processes at once, three
times over, give one study, one "created" and three "exists, unchanged", and the three
baselines queued once.

The racing processes are forked from one that imported the CLI (``tuner.testing.cli_race``):
separate processes with their own connections, released together at the command, without
paying an interpreter's imports each."""

from __future__ import annotations

import shutil
from pathlib import Path

import optuna

from tuner.testing.cli_race import race

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def test_concurrent_creates_give_one_study_and_one_answer_each(pg_admin, tmp_path):
    from tuner.testing.databases import fresh_postgres

    shutil.copytree(STUDIES / "models", tmp_path / "models")
    shutil.copy(STUDIES / "demo-sim.toml", tmp_path / "race.toml")
    for attempt in range(3):
        with fresh_postgres() as url:
            answers = race(["study", "create", tmp_path / "race.toml", "--storage", url], 4,
                           tmp_path / f"out-{attempt}")
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
    "created" or "exists, unchanged", and exactly one says "created". (The processes
    meet at the new file together: ``race`` releases them after their imports.)"""
    shutil.copytree(STUDIES / "models", tmp_path / "models")
    shutil.copy(STUDIES / "demo-sim.toml", tmp_path / "race.toml")
    url = f"sqlite:///{tmp_path}/fresh.db"
    answers = race(["study", "create", tmp_path / "race.toml", "--storage", url], 24,
                   tmp_path / "out", timeout=600)
    assert [a for a in answers if a[0] != 0 or a[2]] == []
    verbs = sorted("created" if " created in " in out else
                   "exists" if "exists, unchanged" in out else out for _, out, _ in answers)
    assert verbs == ["created"] + ["exists"] * 23, answers
    assert len(optuna.load_study(study_name="race", storage=url).get_trials()) == 3


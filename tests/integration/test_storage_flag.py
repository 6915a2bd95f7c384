"""Issue 47 case 11 and issue 46: storage URLs that were silently taken, or refused with
SQLAlchemy's text and exit 1. Real `tuner` processes: an empty --storage (an unset shell
variable) and a scheme tuner cannot use exit 2 with one line naming the schemes it takes;
a relative SQLite path is taken from the current folder with a note saying so; and the
read-only commands leave an empty PostgreSQL database without tables."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tuner.testing.cli_fork import run_tuner
import sqlalchemy

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def tuner(*args, cwd: Path, home: Path) -> tuple[int, str, list[str]]:
    out = run_tuner(args, cwd=cwd, timeout=120, env={**os.environ, "TUNER_HOME": str(home)})
    return out.returncode, out.stdout, out.stderr.strip().splitlines()


@pytest.fixture
def demo(tmp_path) -> Path:
    shutil.copytree(STUDIES / "models", tmp_path / "models")
    path = tmp_path / "demo.toml"
    shutil.copy(STUDIES / "demo-sim.toml", path)
    return path


@pytest.mark.parametrize("url,words", [
    ("", ["--storage is empty", "unset variable"]),
    ("   ", ["--storage is empty"]),
    ("foo://", ["foo://", "not supported", "sqlite:///PATH", "postgresql+psycopg://"]),
    ("mysql://u@h/db", ["mysql://", "not supported", "sqlite:///PATH"]),
    ("sqllite:///x.db", ["sqllite://", "did you mean sqlite://", "sqlite:///PATH"]),
    ("postgressql://u@h/db", ["did you mean postgresql://", "postgresql+psycopg://"]),
    ("postgresql+asyncpg://u@h/db", ["postgresql+asyncpg://", "not installed"]),
])
def test_storage_urls_that_are_input_errors(url, words, demo, tmp_path):
    home = tmp_path / "home"
    for args in (("study", "create", demo), ("study", "list"), ("best", "demo")):
        code, out, err = tuner(*args, "--storage", url, cwd=tmp_path, home=home)
        assert code == 2 and out == "" and len(err) == 1, (args, err)
        assert err[0].startswith("tuner: error: ") and all(w in err[0] for w in words), err
    assert not home.exists()  # the default storage was not used
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.toml", "models"]


def test_a_relative_sqlite_path_is_said_and_made_absolute(demo, tmp_path):
    """``sqlite:///tmp/x.db`` (three slashes) is ``tmp/x.db`` in the current folder: the
    study goes there, a note on stderr names the file and the four-slash absolute form, and
    what is printed afterwards is the absolute URL."""
    code, out, err = tuner("study", "create", demo, "--storage", "sqlite:///tmp/x.db",
                           cwd=tmp_path, home=tmp_path / "home")
    wanted = tmp_path / "tmp" / "x.db"
    assert code == 0 and wanted.is_file(), err
    assert err == [f"tuner: note: sqlite:///tmp/x.db is a path relative to this folder: "
                   f"{wanted} (an absolute path takes four slashes, "
                   "sqlite:////path/tuner.db)"]
    assert f"created in sqlite:///{wanted}:" in out
    code, out, err = tuner("study", "list", "--storage", f"sqlite:///{wanted}",
                           cwd=tmp_path, home=tmp_path / "home")
    assert code == 0 and err == [] and "demo" in out


def test_read_only_commands_leave_an_empty_database_without_tables(pg_admin, tmp_path):
    from tuner.testing.databases import fresh_postgres

    with fresh_postgres() as url:
        for args in (("best", "demo"), ("pareto", "demo"), ("status", "demo", "--once"),
                     ("status", "demo", "--json"), ("report", "demo", "-o", "r.html")):
            code, _, err = tuner(*args, "--storage", url, cwd=tmp_path, home=tmp_path)
            assert code == 2 and len(err) == 1 and "no study 'demo'" in err[0], (args, err)
        code, out, err = tuner("study", "list", "--storage", url, cwd=tmp_path, home=tmp_path)
        assert code == 0 and out.startswith("no studies in "), (out, err)
        engine = sqlalchemy.create_engine(url)
        try:
            assert sqlalchemy.inspect(engine).get_table_names() == []
        finally:
            engine.dispose()


def test_the_dashboard_on_a_storage_without_studies_makes_nothing(pg_admin, tmp_path):
    """`tuner dashboard` only reads: on a SQLite path with no file, or a PostgreSQL
    database without tables, it says so in one line and leaves no file or table behind."""
    from tuner.testing.databases import fresh_postgres

    missing = tmp_path / "none" / "t.db"
    code, out, err = tuner("dashboard", "--storage", f"sqlite:///{missing}", "--port", "1",
                           cwd=tmp_path, home=tmp_path)
    assert code == 2 and len(err) == 1 and "no storage at" in err[0], err
    assert not missing.exists() and not missing.parent.exists()
    with fresh_postgres() as url:
        code, _, err = tuner("dashboard", "--storage", url, "--port", "1", cwd=tmp_path,
                             home=tmp_path)
        assert code == 2 and len(err) == 1, err
        engine = sqlalchemy.create_engine(url)
        try:
            assert sqlalchemy.inspect(engine).get_table_names() == []
        finally:
            engine.dispose()

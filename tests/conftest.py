"""Shared fixtures: storages over SQLite and PostgreSQL, study files, the CLI runner."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from tuner.testing.databases import fresh_postgres, postgres_reachable, sqlite_url

REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "studies"


def pytest_configure(config):
    # Every `tuner` process a test starts answers SIGHUP as one started from a terminal
    # does, however the suite itself was started: under `nohup` (a CI job, a detached
    # run) SIGHUP is ignored, every child inherits that, and a worker then keeps it
    # ignored on purpose (tuner.runner.interrupts), so the SIGHUP test could not pass.
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in ("unit", "inprocess", "integration", "e2e"):
            item.add_marker(getattr(pytest.mark, tier))
    # The longest first (the slow ones): run in parallel (pytest-xdist's own `--dist
    # load`), they then overlap the many short ones instead of ending the run alone. The
    # order is the same in every xdist worker. The e2e tests are a run of their own
    # (`make test`), one at a time (tests/e2e/conftest.py).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session", autouse=True)
def _own_tuner_home(tmp_path_factory):
    """A TUNER_HOME per test session (per xdist worker) unless one is set: a test that does
    not name its own never writes the repository's .tuner/ (GPU locks, logs), and parallel
    sessions never share one."""
    if os.environ.get("TUNER_HOME"):
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUNER_HOME", str(tmp_path_factory.mktemp("tuner-home")))
        yield


@pytest.fixture(scope="session")
def pg_admin() -> None:
    """Skips locally, fails in CI (CI=true), when PostgreSQL cannot be reached."""
    reason = postgres_reachable()
    if reason:
        message = f"PostgreSQL unreachable: {reason}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(params=["sqlite", "postgres"])
def storage_url(request, tmp_path) -> str:
    """Every storage test runs on a fresh SQLite file and a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    request.getfixturevalue("pg_admin")
    with fresh_postgres() as url:
        yield url


@pytest.fixture
def study_file(tmp_path):
    """Write a study file (TOML text) next to a copy of the model shapes; return its path."""
    shutil.copytree(STUDIES / "models", tmp_path / "models", dirs_exist_ok=True)

    def write(text: str, name: str = "s.toml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def shared_engine_answer(tmp_path_factory):
    """``share(study_path)``: the study's installed vLLM asked once per session, across
    pytest-xdist workers (``tuner.testing.engine_answers``), for tests that are not about
    the asking."""
    from tuner.storage import load_study_file
    from tuner.testing.engine_answers import share_answer

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the folder of this run's workers' own folders

    def share(path: Path) -> None:
        share_answer(load_study_file(path), root / "engine-answers")

    return share


@pytest.fixture
def run_cli(capsys):
    """Run `tuner ARGS` in-process; returns (exit code, stdout, stderr)."""
    from tuner.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = int(e.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run

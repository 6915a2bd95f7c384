"""Seen case 5 of issue 20: input errors that were tracebacks or silent success. Each is a
real `tuner` subprocess: exit 2, one line on stderr naming what to fix, no traceback, and
nothing left behind."""

from __future__ import annotations

import os
import shutil
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tuner.testing.api_procs import api_process
from tuner.testing.studies import make_study
from tuner.testing.cli_fork import run_tuner

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def tuner(*args, env=None, timeout=60) -> tuple[int, list[str]]:
    out = run_tuner(args, timeout=timeout, env={**os.environ, **(env or {})})
    return out.returncode, out.stderr.strip().splitlines()


def one_line(code: int, lines: list[str], *words: str) -> None:
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("tuner: error: ") and all(w in lines[0] for w in words), lines


@pytest.fixture
def demo(tmp_path) -> Path:
    shutil.copytree(STUDIES / "models", tmp_path / "models")
    path = tmp_path / "demo.toml"
    shutil.copy(STUDIES / "demo-sim.toml", path)
    return path


def test_a_binary_study_file(tmp_path):
    path = tmp_path / "bin.toml"
    path.write_bytes(bytes(range(256)) * 8)
    one_line(*tuner("study", "create", path, "--storage", f"sqlite:///{tmp_path}/t.db"),
             str(path), "UTF-8")


def test_a_directory_as_study_file(tmp_path):
    (tmp_path / "d.toml").mkdir()
    one_line(*tuner("study", "create", tmp_path / "d.toml", "--storage",
                    f"sqlite:///{tmp_path}/t.db"), "d.toml", "directory")


def test_a_study_file_over_one_megabyte_is_refused(demo, tmp_path):
    big = tmp_path / "big.toml"
    big.write_text(demo.read_text() + f'\n# {"x" * 10_000_000}\n')
    url = f"sqlite:///{tmp_path}/t.db"
    one_line(*tuner("study", "create", big, "--storage", url), "big.toml", "1 MB")
    assert not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("url,words", [
    ("postgresql://h:notaport/db", ["port", "notaport"]),
    ("postgresql+psycopg://u@h:99999/db", ["port", "99999"]),
    ("sqlite:///", ["sqlite", "path"]),
    ("sqlite://", ["sqlite", "path"]),
    ("sqlite:///:memory:", ["sqlite", "path"]),
])
def test_storage_urls_that_cannot_hold_a_study(url, words, demo, tmp_path):
    code, lines = tuner("study", "create", demo, "--storage", url, env={"TUNER_HOME": str(
        tmp_path / "home")})
    one_line(code, lines, *words)
    assert "created" not in " ".join(lines)


def test_api_on_a_port_in_use(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    make_study(url, n=3)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        one_line(*tuner("api", "--port", port, "--storage", url), str(port), "in use")


def test_api_on_a_storage_that_does_not_exist_leaves_no_file(tmp_path):
    """A read-only service has nothing to serve from a storage no study was created in,
    and must not create one where a mistyped path points."""
    one_line(*tuner("api", "--storage", f"sqlite:///{tmp_path}/typo.db"), "typo.db",
             "no storage")
    assert list(tmp_path.iterdir()) == []


def test_worker_on_a_missing_study_leaves_no_file(tmp_path):
    home = tmp_path / "home"
    one_line(*tuner("worker", "nope", "--gpus", "0", env={"TUNER_HOME": str(home)}),
             "nope")
    assert not home.exists() or list(home.rglob("*")) == []
    one_line(*tuner("worker", "nope", "--storage", f"sqlite:///{tmp_path}/x/t.db"), "nope")
    assert not (tmp_path / "x").exists()


def test_a_nul_in_an_api_study_name_is_no_storage_error(storage_url, tmp_path):
    """PostgreSQL refuses a NUL in a text parameter: that was a 503, "cannot read the
    storage", for what is only a name that no study can have."""
    make_study(storage_url, "empty")
    with api_process(storage_url, tmp_path / "api.log") as base:
        for name in ("a%00b", "%00", "..%2f..%2fetc"):
            try:
                urllib.request.urlopen(f"{base}/studies/{name}", timeout=30)
                status = 200
            except urllib.error.HTTPError as e:
                status = e.code
            assert status == 404, name

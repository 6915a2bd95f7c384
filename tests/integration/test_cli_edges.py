"""Issue 67, item 6: small edges of the command line, each on real `tuner` processes.

Before: a reader of stdout that went away (`tuner study create ... | head -1`) left a
BrokenPipeError traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

pytestmark = pytest.mark.integration
STUDIES = Path(__file__).resolve().parents[2] / "studies"
STUDY = '[model]\npath = "models/llama3-8b"\n[engine]\nkind = "sim"\n'


def _gone_reader(args: list[str], cwd: Path) -> tuple[int, str]:
    """`tuner ARGS` with stdout a pipe whose reader closed it before a byte was written
    (as `| head -1` does once it has its line): the exit code and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "tuner", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(60), err


def test_a_closed_stdout_ends_quietly(tmp_path):
    shutil.copytree(STUDIES / "models", tmp_path / "models")
    (tmp_path / "s.toml").write_text(STUDY)
    url = f"sqlite:///{tmp_path}/t.db"
    for args in (["study", "create", "s.toml", "--storage", url],
                 ["study", "list", "--storage", url]):
        code, err = _gone_reader(args, tmp_path)
        assert err == "" and code == 1, (args, code, err)
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["s"]
    # a stdout that is read is written as before
    out = subprocess.run([sys.executable, "-m", "tuner", "study", "list", "--storage", url],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0 and out.stdout.splitlines()[1].startswith("s "), out

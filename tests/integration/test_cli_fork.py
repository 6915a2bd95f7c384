"""`tuner` commands forked from the test process's supervisor behave as `python -m tuner`
processes: the same output and exit code, their own environment and working folder, and a
plain process wherever the environment could make a fork differ."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.engine import forkclient
from tuner.testing.cli_fork import ForkedTuner, run_tuner, start_tuner

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def plain(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner", *map(str, args)],
                          capture_output=True, text=True, timeout=120, **kw)


def test_a_forked_command_prints_and_exits_as_a_plain_one(tmp_path):
    for args in (["--help"], ["study", "create", tmp_path / "none.toml"],
                 ["status", "nope", "--storage", f"sqlite:///{tmp_path}/t.db"],
                 ["no-such-command"]):
        forked, fresh = run_tuner(args), plain(args)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode, fresh.stdout, fresh.stderr), args
    assert isinstance(start_tuner(["--help"]), ForkedTuner)


def test_the_child_has_its_own_environment_and_folder(tmp_path):
    """A relative study file is read from the child's folder, and the study lands in the
    TUNER_HOME of the child's environment, not the test process's."""
    shutil.copytree(STUDIES / "models", tmp_path / "models")
    shutil.copy(STUDIES / "demo-sim.toml", tmp_path / "demo.toml")
    home = tmp_path / "home"
    env = {**os.environ, "TUNER_HOME": str(home)}
    env.pop("TUNER_STORAGE", None)
    made = run_tuner(["study", "create", "demo.toml"], env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (home / "tuner.db").exists()
    listed = run_tuner(["study", "list"], env=env, cwd=tmp_path)
    assert listed.returncode == 0 and "\ndemo " in listed.stdout, listed


def test_an_environment_that_could_change_the_imports_gets_a_plain_process(tmp_path):
    env = {**os.environ, "TQDM_DISABLE": "1"}  # read by tqdm when it is imported
    proc = start_tuner(["--help"], env=env, stdout=tmp_path / "out")
    assert isinstance(proc, subprocess.Popen) and proc.wait(60) == 0
    assert "usage: tuner" in (tmp_path / "out").read_text()


def test_a_forked_commands_cpu_is_reported_once_it_exits(tmp_path):
    """The supervisor reaps a forked command and reports its CPU seconds with its exit code,
    and this process counts them (what the suite's CPU meter charges to the test)."""
    shutil.copytree(STUDIES / "models", tmp_path / "models")
    shutil.copy(STUDIES / "demo-sim.toml", tmp_path / "demo.toml")
    env = {**os.environ, "TUNER_HOME": str(tmp_path / "home")}
    env.pop("TUNER_STORAGE", None)
    before = forkclient.reaped_cpu_s()
    proc = start_tuner(["study", "create", "demo.toml"], env=env, cwd=tmp_path)
    assert isinstance(proc, ForkedTuner)
    assert proc.wait(120) == 0
    assert proc.child.cpu_s > 0
    assert forkclient.reaped_cpu_s() - before == pytest.approx(proc.child.cpu_s)

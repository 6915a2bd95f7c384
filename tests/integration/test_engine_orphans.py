"""Seen case 4 of issue 67: after a worker's kill -9 its server's own children (with vLLM,
the engine core that holds the GPU's memory) lived on under PID 1, in plain and
pre-imported starts; and SIGHUP killed a worker outright, leaving its trial RUNNING.

Real `tuner worker` processes whose engine is the stand-in (``tuner.testing.stand_in``):
it never becomes ready and has a sleeping child in its process group, as vLLM's API
server has its engine core. The next worker on the same GPU, or `tuner stop`, kills what a
killed one left (``tuner.engine.orphans``); SIGHUP stops a worker as SIGTERM does."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys

import pytest
from optuna.trial import TrialState

from tuner.engine import orphans, proctree
from tuner.storage import create_study, load_study_file
from tuner.testing.cli_fork import run_tuner
from tuner.testing.sim_studies import trials_of
from tuner.testing.worker_procs import interrupt, start_worker, wait_for
from tuner.trials import record

COMMAND = [sys.executable, "-m", "tuner.testing.stand_in", "--behave", "hang", "--child"]
STUDY = f'''
[model]
path = "models/llama3-8b"
[search]
baselines = false
[engine]
command = {json.dumps(COMMAND)}
start = "{{start}}"
start_timeout_s = 600
stop_grace_s = 5
'''
CHILD = "time.sleep(3600)"  # the stand-in's child, as its command line reads


def _study(study_file, url: str, start: str = "plain") -> None:
    create_study(load_study_file(study_file(STUDY.format(start=start), "o.toml")), url)


def _env(home) -> dict[str, str]:
    return {"TUNER_HOME": str(home), "TUNER_HEARTBEAT_S": "1",
            "TUNER_ALLOWED_ENGINES": shlex.join(COMMAND)}


def _engine_child(worker: int) -> int | None:
    """The stand-in's child below ``worker`` (through the pre-imported supervisor too)."""
    return next((p for p in proctree.descendants(worker)
                 if any(CHILD in w for w in proctree.cmdline(p))), None)


def _kill_group(pgid: int) -> None:
    """A test that fails must not leave the stand-ins behind."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_with_its_engine(worker) -> None:
    """Kill a worker that is still there, and its servers' groups (which a kill -9 of the
    worker alone would leave where this fix is missing)."""
    if worker is None or worker.poll() is not None:
        return
    groups = set()
    for pid in proctree.descendants(worker.pid):
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    worker.kill()
    worker.wait()
    for group in groups - {os.getpgrp()}:
        _kill_group(group)


def _killed_with_a_child_left(url: str, env: dict, log) -> tuple[int, int]:
    """Start a worker, kill -9 it while its server starts; (the server's child that
    outlived it, the child's process group)."""
    first = start_worker("o", url, "0", env=env, log=log)
    child = wait_for(lambda: _engine_child(first.pid), 120)
    assert child, log.read_text()[-3000:]
    group = os.getpgid(child)
    try:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        # the server died with its worker (parent-death signal), its child did not
        assert wait_for(lambda: proctree.in_group(group) == [child], 60), \
            proctree.in_group(group)
    except BaseException:
        _kill_group(group)
        raise
    return child, group


@pytest.mark.parametrize("start", ["plain", "preimported"])
def test_the_next_worker_on_the_gpu_reaps_what_a_killed_worker_left(start, study_file,
                                                                    tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    _study(study_file, url, start)
    env = _env(tmp_path)
    child, group = _killed_with_a_child_left(url, env, tmp_path / "a.log")
    second = None
    try:
        second = start_worker("o", url, "0", env=env, log=tmp_path / "b.log")
        # its own server starts only after it took the GPU, and reaped
        assert wait_for(lambda: _engine_child(second.pid), 120), \
            (tmp_path / "b.log").read_text()[-3000:]
        assert not proctree.alive(child), "the killed worker's engine child still runs"
        assert "killed 1 engine process(es)" in (tmp_path / "b.log").read_text()
        assert interrupt(second, signal.SIGTERM, log=tmp_path / "b.log") == 130
        # a server stopped cleanly leaves no record for the next worker to act on
        assert not (tmp_path / "gpus" / "0.engine").exists()
    finally:
        _kill_group(group)
        _kill_with_its_engine(second)


def test_tuner_stop_reaps_what_a_killed_worker_left(study_file, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    _study(study_file, url)
    env = _env(tmp_path)
    child, group = _killed_with_a_child_left(url, env, tmp_path / "a.log")
    try:
        out = run_tuner(["stop", "o", "--storage", url], env={**os.environ, **env},
                        timeout=120)
        assert out.returncode == 0, out.stderr
        assert not proctree.alive(child), "the killed worker's engine child still runs"
        assert "killed 1 engine process(es)" in out.stderr, out.stderr
        assert not (tmp_path / "gpus" / "0.engine").exists()
    finally:
        _kill_group(group)


def test_sighup_stops_a_worker_as_sigterm_does(study_file, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    _study(study_file, url)
    log = tmp_path / "w.log"
    proc = start_worker("o", url, "0", env=_env(tmp_path), log=log)
    child = wait_for(lambda: _engine_child(proc.pid), 120)
    assert child, log.read_text()[-3000:]
    group = os.getpgid(child)
    try:
        assert interrupt(proc, signal.SIGHUP, log=log) == 130, log.read_text()[-3000:]
        assert proctree.in_group(group) == []  # its server and the server's child
        trials = trials_of("o", url)
        stopped = [t for t in trials if t.user_attrs.get("outcome") == record.STOPPED]
        assert len(stopped) == 1 and stopped[0].state == TrialState.FAIL, \
            [(t.number, t.state, t.user_attrs.get("outcome")) for t in trials]
        assert not [t for t in trials if t.state == TrialState.RUNNING]
        assert [t for t in trials if t.state == TrialState.WAITING]  # queued again
    finally:
        _kill_group(group)
        _kill_with_its_engine(proc)


def test_a_record_whose_id_now_names_another_process_kills_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)
    try:
        assert wait_for(lambda: proctree.started(other.pid) is not None, 10)
        later = orphans.Group(other.pid, proctree.started(other.pid) + 1, orphans.boot_id())
        (tmp_path / "gpus").mkdir()
        orphans.record([5], later)
        assert orphans.recorded(5) == later
        assert orphans.reap([5]) == [] and other.poll() is None
        assert orphans.recorded(5) is None
    finally:
        other.kill()
        other.wait()

"""Seen case 2 of issue 20: GPU exclusivity was check-then-act. Now a per-GPU lock
($TUNER_HOME/gpus/<id>.lock) is held by each worker for its whole life: two `tuner launch`
at the same moment on one GPU start exactly one worker (20 times over), a worker of
another study is refused naming the holder, and GPU ids are checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tuner.engine.gpulock import GpuBusyError
from tuner.service.launch import launch
from tuner.service.workers import views
from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.cli_fork import run_tuner
from tuner.testing.worker_procs import start_worker, stop, wait_for

STUDY = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 32
output_len = 4
max_concurrency = 2
num_requests = 4
warmup_requests = 0
max_client_lag_ms = 1000
[search]
n_trials = 1000
baselines = false
[engine]
kind = "sim"
time_scale = 1000
start_timeout_s = 60
'''
# The first worker of the refusal test must still run when it is stopped, however slow the
# host: its one trial is a benchmark far longer than the test.
LONG_TRIAL = STUDY.replace("num_requests = 4", "num_requests = 100000").replace(
    "time_scale = 1000", "time_scale = 1")


def live_workers(names, url) -> list:
    out = []
    for n in names:
        attrs = open_study(n, url).study.user_attrs
        out += [w for w in views(attrs, time.time(), 10) if w.alive]
    return out


def stop_all(pids, sig=15, log=None) -> None:
    for pid in pids:
        stop(pid, log, sig)


@pytest.mark.slow
def test_two_concurrent_launches_on_one_gpu_start_exactly_one_worker(study_file, tmp_path,
                                                                     monkeypatch):
    """Two launches (of two studies, so that only the lock can tell) in two threads at the
    same moment; each starts a real worker process. Twenty times, each in a fresh
    TUNER_HOME; the winner's worker is then killed (the kernel drops its lock)."""
    url = f"sqlite:///{tmp_path}/t.db"
    for name, text in (("a", LONG_TRIAL), ("b", STUDY)):
        create_study(load_study_file(study_file(text, f"{name}.toml")), url)
    for attempt in range(20):
        monkeypatch.setenv("TUNER_HOME", str(tmp_path / f"home{attempt}"))
        go = threading.Barrier(2)

        def one(name):
            go.wait()
            try:
                return launch(name, url, "0")
            except GpuBusyError as e:
                return e

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(one, ("a", "b")))
        started = [r for r in results if isinstance(r, list)]
        try:
            refused = [str(r) for r in results if isinstance(r, GpuBusyError)]
            assert len(started) == 1 and len(refused) == 1, (attempt, results)
            assert refused[0].startswith("GPU 0 is held by worker pid"), refused
            assert [w.pid for w in live_workers(("a", "b"), url)] == [started[0][0].pid]
        finally:
            stop_all([w.pid for r in started for w in r], 9)


def test_a_worker_of_another_study_is_refused_naming_the_holder(study_file, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    for name, text in (("a", LONG_TRIAL), ("b", STUDY)):
        create_study(load_study_file(study_file(text, f"{name}.toml")), url)
    env = {"TUNER_HOME": str(tmp_path)}
    first = start_worker("a", url, "0", env=env, log=tmp_path / "a.log")
    try:
        assert wait_for(lambda: live_workers(("a",), url), 60)
        second = start_worker("b", url, "1,0", env=env, log=tmp_path / "b.log")
        assert second.wait(60) == 1
        lines = (tmp_path / "b.log").read_text().strip().splitlines()
        assert len(lines) == 1 and re.fullmatch(
            rf"tuner: error: GPU 0 is held by worker pid {first.pid} \(study a, since "
            r"\d\d:\d\d:\d\d\) on this host; stop it \(`tuner stop a`\) or choose other GPUs",
            lines[0]), lines
        assert live_workers(("b",), url) == []
        out = subprocess.run([sys.executable, "-m", "tuner", "launch", "b", "--gpus", "0",
                              "--storage", url], env={**os.environ, **env},
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and f"held by worker pid {first.pid}" in out.stderr
        # GPU 1 was not kept by the refused worker: another takes it.
        third = start_worker("b", url, "1", env=env, log=tmp_path / "c.log")
        assert wait_for(lambda: live_workers(("b",), url), 60), (tmp_path / "c.log").read_text()
        stop_all([third.pid], log=tmp_path / "c.log")
    finally:
        stop_all([first.pid], log=tmp_path / "a.log")
    assert first.wait(60) == 130  # stopped by SIGTERM


@pytest.mark.parametrize("gpus", ["-1", "99999999999999999999", "64"])
@pytest.mark.parametrize("command", ["worker", "launch"])
def test_gpu_ids_outside_the_host_are_refused(command, gpus, tmp_path):
    out = run_tuner([command, "s", "--gpus", gpus, "--storage", f"sqlite:///{tmp_path}/t.db"],
                    timeout=60, env={**os.environ, "TUNER_HOME": str(tmp_path)})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and "no such GPU" in lines[0], lines

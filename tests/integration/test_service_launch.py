"""`tuner launch`: its refusals (the vllm engine on a machine without GPUs, such as this
one; GPU lists that do not fit; a study that does not exist: one line each, no traceback,
no worker started), its GPU groups, and how a worker is told dead."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tuner.testing.studies import make_study

no_gpus = pytest.mark.skipif(shutil.which("nvidia-smi") is not None,
                                reason="this machine has nvidia-smi: GPUs may be visible")


@no_gpus
def test_vllm_engine_without_gpus_fails_with_one_line(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    name = make_study(url, "empty").spec.name
    out = subprocess.run([sys.executable, "-m", "tuner", "launch", name, "--gpus", "0",
                          "--storage", url], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TUNER_HOME": str(tmp_path)})
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "tuner: error: cannot see GPU 0 (nvidia-smi is missing or failed); the vllm engine "
        "needs NVIDIA GPUs: run on a GPU host, or use engine.kind = \"sim\" to try the "
        "study on the simulator"]
    assert not (tmp_path / "studies" / name / "workers").exists()


@no_gpus
def test_all_gpus_needs_nvidia_smi_and_bad_lists_are_usage_errors(tmp_path, run_cli,
                                                                  monkeypatch):
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    url = f"sqlite:///{tmp_path}/t.db"
    name = make_study(url, "empty").spec.name
    code, _, err = run_cli("launch", name, "--gpus", "all", "--storage", url)
    assert code == 1 and err.strip().splitlines() == [
        "tuner: error: --gpus all needs nvidia-smi, which is not available here; give GPU "
        "ids, e.g. --gpus 0,1"]
    code, _, err = run_cli("launch", name, "--gpus", "0,0", "--storage", url)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "distinct" in err
    code, _, err = run_cli("launch", "nope", "--gpus", "0", "--storage", url)
    assert code == 2 and "no study 'nope'" in err
    assert not (tmp_path / "studies").exists()


def test_gpu_groups_follow_tensor_parallel():
    from tuner.errors import UsageError
    from tuner.service.launch import groups

    assert groups([0, 1, 2, 3], 1) == [(0,), (1,), (2,), (3,)]
    assert groups([4, 5, 6, 7], 2) == [(4, 5), (6, 7)]
    with pytest.raises(UsageError, match="do not split into groups of 2"):
        groups([0, 1, 2], 2)


def test_a_worker_is_dead_when_its_heartbeat_is_stale_or_its_process_gone():
    from tuner.service.workers import views

    def info(beat, state="running", pid=1):
        return {"host": "h", "pid": pid, "gpus": [0], "state": state, "heartbeat": beat,
                "trial": 3, "phase": "benchmark", "phase_since": 90.0, "started": 1.0}

    attrs = {"tuner.worker.a": info(99.0), "tuner.worker.b": info(50.0),
             "tuner.worker.c": info(99.0, pid=2), "tuner.worker.d": info(99.0, "exited"),
             "tuner.spec": {}}
    seen = {w.id: w for w in views(attrs, now=100.0, interval_s=10,
                                   alive_pid=lambda host, pid: pid == 1)}
    assert set(seen) == {"a", "b", "c", "d"}
    assert seen["a"].alive and seen["a"].trial == 3 and seen["a"].phase_elapsed_s == 10.0
    assert [seen[k].state for k in "bcd"] == ["dead", "dead", "exited"]
    assert not any(seen[k].alive for k in "bcd")


def test_a_worker_is_judged_by_the_interval_it_publishes():
    from tuner.service.workers import views

    def info(beat, **own):
        return {"host": "h", "pid": 1, "gpus": [0], "state": "running", "heartbeat": beat,
                "started": 1.0, **own}

    # the reader beats every 10 s: a worker's last beat may be 20 s old, or two of its own
    # intervals where it published a longer one (never fewer than the reader's)
    attrs = {"tuner.worker.slow": info(50.0, interval_s=60),  # 50 s: within its 120 s
             "tuner.worker.slow-dead": info(-30.0, interval_s=60),  # 130 s
             "tuner.worker.fast": info(85.0, interval_s=1),  # 15 s late: within 20 s
             "tuner.worker.fast-dead": info(75.0, interval_s=1),  # 25 s
             "tuner.worker.old": info(85.0)}  # a record from before workers published it
    seen = {w.id: w.alive for w in views(attrs, now=100.0, interval_s=10,
                                         alive_pid=lambda host, pid: True)}
    assert seen == {"slow": True, "slow-dead": False, "fast": True, "fast-dead": False,
                    "old": True}

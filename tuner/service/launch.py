"""`tuner launch`: one background `tuner worker` per GPU group, detached from the terminal.

Each worker runs in its own session (it survives the terminal and logout), reads nothing
from stdin, and writes to its own log in ``study_dir(name)/workers/``. The storage URL
reaches it through the environment (``TUNER_STORAGE``, or ``TUNER_STORAGE_FILE`` when the
URL came from a file), never its command line, so a password does not show in ``ps``. Each
GPU is locked (``engine/gpulock.py``) before any worker starts. GPUs that run another
process, or a live worker of the study, are refused with the reason. Launching clears a
stop flag left by `tuner stop` and records the launch time (a ``search.deadline`` given as
a duration counts from it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import LaunchError, UsageError
from tuner.engine import gpu, proctree
from tuner.runner import study_dir
from tuner.engine.gpulock import GpuLocks
from tuner.engine.trust import EngineTrust
from tuner.storage.registry import STOP
from tuner.runner.stopping import LAUNCHED_AT
from tuner.service.workers import views
from tuner.storage import OpenStudy, open_study
from tuner.storage.database import heartbeat_s


@dataclass(frozen=True)
class Launched:
    gpus: tuple[int, ...]
    pid: int
    log: Path


def groups(gpus: Sequence[int], per_server: int) -> list[tuple[int, ...]]:
    """Consecutive groups of ``per_server`` GPUs (tensor parallel), one worker each."""
    if len(gpus) % per_server:
        raise UsageError(f"{len(gpus)} GPUs ({','.join(map(str, gpus))}) do not split into "
                         f"groups of {per_server} (model.tensor_parallel_size); give a "
                         f"multiple of {per_server}")
    return [tuple(gpus[i:i + per_server]) for i in range(0, len(gpus), per_server)]


def visible_gpus() -> list[int]:
    """Every GPU nvidia-smi lists; LaunchError where there is no nvidia-smi."""
    ids = gpu.indices()
    if ids is None:
        raise LaunchError("--gpus all needs nvidia-smi, which is not available here; "
                          "give GPU ids, e.g. --gpus 0,1")
    return ids


def choose_gpus(text: str, opened: OpenStudy | None) -> list[int]:
    if text != "all":
        return list(gpu.parse_gpus(text))
    if opened.spec.engine.kind == "sim" and not shutil.which("nvidia-smi"):
        return list(opened.spec.hardware.gpus)  # simulated GPUs: the study file's list
    return visible_gpus()


def check_free(opened: OpenStudy, gpus: Sequence[int]) -> None:
    """Refuse GPUs held by a live worker of this study or by any other process."""
    study = opened.study
    attrs = study.user_attrs
    for w in views(attrs, time.time(), heartbeat_s()):
        taken = sorted(set(w.gpus) & set(gpus))
        if w.alive and taken:
            raise LaunchError(f"GPU {','.join(map(str, taken))} already runs worker {w.id} "
                              f"of study {opened.spec.name}; `tuner stop {opened.spec.name}` "
                              "first, or choose other GPUs")
    if opened.spec.engine.kind == "sim":
        return  # simulated GPUs: nothing to ask NVML about
    busy = []
    for g in gpus:
        pids = gpu.compute_pids([g])
        if pids is None:
            raise LaunchError(f"cannot see GPU {g} (nvidia-smi is missing or failed); the "
                              "vllm engine needs NVIDIA GPUs: run on a GPU host, or use "
                              "engine.kind = \"sim\" to try the study on the simulator")
        busy += [f"GPU {g} runs pid {p} ({' '.join(proctree.cmdline(p)[:3]) or '?'})"
                 for p in pids]
    if busy:
        raise LaunchError("GPUs in use by other processes: " + "; ".join(busy))


def _spawn(name: str, storage: dict[str, str], locks: GpuLocks, logs: Path,
           trust: EngineTrust) -> Launched:
    group = locks.gpus
    lock_env, lock_fds = locks.handover()
    ids = ",".join(map(str, group))
    log = logs / f"gpu{ids.replace(',', '-')}.log"
    with open(log, "ab") as out:
        out.write(f"\n=== tuner launch {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                  f"study {name}, GPUs {ids}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuner", "worker", name, "--gpus", ids, *trust.argv()],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("TUNER_STORAGE")},
                 **storage, **lock_env, "PYTHONUNBUFFERED": "1"},
            start_new_session=True, close_fds=True, pass_fds=lock_fds)
    proc.returncode = 0  # detached on purpose: never waited for (no warning at exit)
    return Launched(group, proc.pid, log)


def _registered(opened: OpenStudy, pid: int) -> bool:
    attrs = opened.study.user_attrs
    return any(w.pid == pid and w.local for w in views(attrs, time.time(), heartbeat_s()))


def wait_registered(opened: OpenStudy, launched: Sequence[Launched],
                    timeout_s: float = 120.0) -> None:
    """Until every worker has registered; LaunchError with its log's tail if one exits."""
    pending = list(launched)
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for w in list(pending):
            if _registered(opened, w.pid):
                pending.remove(w)
            elif not proctree.alive(w.pid):
                tail = w.log.read_text(errors="replace").strip().splitlines()[-1:]
                raise LaunchError(f"the worker on GPU {','.join(map(str, w.gpus))} exited: "
                                  f"{tail[0] if tail else '(empty log)'} (log: {w.log})")
        time.sleep(0.3)
    if pending:
        raise LaunchError(f"{len(pending)} worker(s) did not register within "
                          f"{timeout_s:.0f} s; see {pending[0].log}")


def launch(name: str, url: str, gpus_text: str, storage: dict[str, str] | None = None,
           trust: EngineTrust | None = None) -> list[Launched]:
    """Start the study's workers; returns them once each has registered. ``storage`` is
    how they find the storage (``storage_env``; default: the URL itself); ``trust`` is
    what they may run (checked here first, then passed on to each worker)."""
    trust = trust or EngineTrust.from_settings()
    if gpus_text != "all":
        choose_gpus(gpus_text, None)  # bad GPU ids before anything is read
    opened = open_study(name, url)
    trust.check(opened.spec)
    gpus = choose_gpus(gpus_text, opened)
    plan = groups(gpus, opened.spec.model.tensor_parallel_size)
    check_free(opened, gpus)
    locks: list[GpuLocks] = []
    try:  # every GPU locked before any worker starts; each worker then holds its own
        for g in plan:
            locks.append(GpuLocks(g, name).acquire())
        return _start(opened, url, locks, trust, storage)
    finally:
        for held in locks:
            held.release()  # this process's descriptors: the workers keep theirs


def _start(opened: OpenStudy, url: str, locks: list[GpuLocks], trust: EngineTrust,
           storage: dict[str, str] | None) -> list[Launched]:
    name = opened.spec.name
    study = opened.study
    study.set_user_attr(STOP, None)
    study.set_user_attr(LAUNCHED_AT, time.time())
    logs = study_dir(name) / "workers"
    logs.mkdir(parents=True, exist_ok=True)
    launched = [_spawn(name, storage or {"TUNER_STORAGE": url}, held, logs, trust)
                for held in locks]
    wait_registered(opened, launched)
    return launched

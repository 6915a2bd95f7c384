"""Engine processes that a killed worker left behind, and the next worker's reaping of them.

A worker killed by SIGKILL cannot stop its server. The server gets SIGTERM (its
parent-death signal) and exits, but what it started (vLLM's engine core, which holds the
GPU's memory) is re-parented to PID 1 and lives on, in the server's process group. So the
supervisor records each server's group beside its GPUs' locks while it runs
(``$TUNER_HOME/gpus/<id>.engine``: the group's id, its leader's start time and the boot),
and removes the record once the group is gone. A record that is still there names the
server of a worker that died; the next worker to take that GPU's lock (``reap``), or
`tuner stop` on that host (``reap_unheld``), kills what is left of the group.

Which processes are the recorded group's: those in a process group of that id, started
no earlier than its leader, on the same boot, while the id's process (if any) is the
leader itself. A group's id is not given to another process while any member lives, so
a group that still has members is the one recorded.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from tuner.engine import proctree
from tuner.engine.gpulock import GpuLocks, lock_path
from tuner.errors import LaunchError

log = logging.getLogger(__name__)

# How long the reaper waits for the killed processes to be gone (only a process stuck in
# the kernel takes longer, and then it is left, as the supervisor's stop leaves it).
REAP_WAIT_S = 10


@dataclass(frozen=True)
class Group:
    """A server's process group: its id (the leader's pid), when the leader started
    (clock ticks since boot) and the boot it started in."""

    pgid: int
    started: int
    boot: str

    @classmethod
    def of(cls, leader: int) -> "Group | None":
        """The group that process ``leader`` leads, or None once it is gone."""
        started = proctree.started(leader)
        return None if started is None else cls(leader, started, boot_id())


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def record_path(gpu: int) -> Path:
    return lock_path(gpu).with_suffix(".engine")


def record(gpus: Sequence[int], group: Group) -> None:
    """Write ``group`` as the engine running on ``gpus`` (one file per GPU)."""
    data = json.dumps(asdict(group))
    for gpu in gpus:
        path = record_path(gpu)
        temp = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            temp.write_text(data)
            os.replace(temp, path)
        except OSError as e:  # the trial runs on; a killed worker's engine is then not found
            log.warning("tuner: cannot record the engine's process group in %s: %s", path, e)


def forget(gpus: Sequence[int], group: Group) -> None:
    """Remove the records of ``group`` (its processes are gone); another's stay."""
    for gpu in gpus:
        if recorded(gpu) == group:
            record_path(gpu).unlink(missing_ok=True)


def recorded(gpu: int) -> Group | None:
    """The group recorded for ``gpu``, or None (no record, or one that does not read)."""
    try:
        data = json.loads(record_path(gpu).read_text())
        group = Group(int(data["pgid"]), int(data["started"]), str(data["boot"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return group if group.pgid > 1 else None


def members(group: Group) -> list[int]:
    """The living processes of ``group`` (see the module's note); never this process's
    own group."""
    if group.boot != boot_id() or group.pgid == os.getpgrp():
        return []
    leader = proctree.started(group.pgid)
    if leader is not None and leader != group.started:
        return []  # the id is another process's now: the recorded group is gone
    return [p for p in proctree.in_group(group.pgid)
            if (proctree.started(p) or 0) >= group.started]


def reap(gpus: Sequence[int]) -> list[int]:
    """Kill what is left of the engine groups recorded for ``gpus`` (the caller holds
    their locks, so no living worker runs them), wait for it to be gone, and remove the
    records; returns the pids killed."""
    killed: list[int] = []
    for gpu in gpus:
        group = recorded(gpu)
        pids = members(group) if group is not None else []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + REAP_WAIT_S
        while any(proctree.alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        killed += pids
        record_path(gpu).unlink(missing_ok=True)
    return killed


def reap_unheld(gpus: Sequence[int], by: str = "tuner stop") -> list[int]:
    """``reap`` on each of ``gpus`` whose lock no worker holds, taking it for the moment
    (``by`` names the holder meanwhile); a GPU whose worker lives is left to it."""
    killed: list[int] = []
    for gpu in gpus:
        if recorded(gpu) is None:
            continue
        try:
            with GpuLocks((gpu,), by):
                killed += reap((gpu,))
        except LaunchError:  # held (GpuBusyError), or the lock cannot be opened here
            continue
    return killed

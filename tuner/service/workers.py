"""The workers registered on a study, as status, launch and stop see them (pure but for
``pid_alive``, which asks /proc).

A worker is alive while its record says ``running``, its heartbeat is younger than two
intervals, and, when it runs on this host, its process exists. Anything else is dead
(``exited`` and ``interrupted`` workers ended cleanly; a worker killed outright keeps
``running`` and is told dead by its stale heartbeat or its missing process).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tuner.engine import proctree
from tuner.storage.registry import PREFIX


@dataclass(frozen=True)
class WorkerView:
    id: str
    host: str
    pid: int
    gpus: tuple[int, ...]
    state: str             # running | exited | interrupted | dead
    alive: bool
    trial: int | None
    phase: str
    phase_elapsed_s: float
    started: float
    heartbeat_age_s: float

    @property
    def local(self) -> bool:
        return self.host == socket.gethostname()


def pid_alive(host: str, pid: int) -> bool | None:
    """Whether the process lives; None when it runs on another host."""
    if host != socket.gethostname():
        return None
    return proctree.alive(pid)


def views(attrs: Mapping[str, Any], now: float, interval_s: float,
          alive_pid: Callable[[str, int], bool | None] = pid_alive) -> list[WorkerView]:
    """Every registered worker of a study (from its user attrs), oldest first. A worker is
    alive while its last beat is at most two intervals old: the reader's ``interval_s``, or
    the worker's own where it published a longer one (a worker told to beat every minute
    is not dead after two of the reader's). A shorter one of its own does not make it dead
    sooner: on a loaded host a fast worker's beat can come several of its intervals late."""
    out = []
    for key, info in attrs.items():
        if not key.startswith(PREFIX) or not isinstance(info, dict):
            continue
        age = now - float(info.get("heartbeat") or 0)
        state = str(info.get("state", "running"))
        host, pid = str(info.get("host", "")), int(info.get("pid") or 0)
        judged_s = max(interval_s, float(info.get("interval_s") or 0))
        alive = state == "running" and age <= 2 * judged_s and alive_pid(host, pid) is not False
        if state == "running" and not alive:
            state = "dead"
        out.append(WorkerView(
            id=key.removeprefix(PREFIX), host=host, pid=pid,
            gpus=tuple(int(g) for g in info.get("gpus") or ()), state=state, alive=alive,
            trial=info.get("trial") if alive else None,
            phase=str(info.get("phase", "")) if alive else state,
            phase_elapsed_s=max(0.0, now - float(info.get("phase_since") or now)),
            started=float(info.get("started") or 0), heartbeat_age_s=age))
    return sorted(out, key=lambda w: (w.started, w.id))

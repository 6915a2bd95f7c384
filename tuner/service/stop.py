"""`tuner stop`: set the study's stop flag and wait until its workers are gone.

By default (flag ``True``) each worker finishes and records its running trial, then exits
before asking for another. With ``now`` (flag ``"now"``) each worker's heartbeat thread
also sends SIGTERM to its own process, which stops the server and records the trial as
stopped (queued again). Workers on this host that are still there ``kill_after_s`` after a
``now`` stop are killed with their process group, and then what their servers (or those of
a worker killed earlier) left on this host's GPUs is reaped (``orphans.reap_unheld``), so
that nothing is left.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from tuner.engine import orphans, proctree
from tuner.storage.registry import STOP
from tuner.service.workers import WorkerView, views
from tuner.storage import open_study
from tuner.storage.database import heartbeat_s


def _live(study) -> list[WorkerView]:
    attrs = study.user_attrs
    return [w for w in views(attrs, time.time(), heartbeat_s()) if w.alive]


def _kill(w: WorkerView) -> None:
    try:
        if os.getpgid(w.pid) == w.pid:  # launched workers lead their own session
            os.killpg(w.pid, signal.SIGKILL)
        else:
            os.kill(w.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop(name: str, url: str, now: bool = False, timeout_s: float | None = None,
         kill_after_s: float = 120.0,
         say: Callable[[str], None] = lambda s: None) -> list[WorkerView]:
    """Ask the workers to stop and wait for them; returns those still alive at the
    timeout (none when every worker exited)."""
    study = open_study(name, url).study
    study.set_user_attr(STOP, "now" if now else True)
    say("stopping now: running trials are stopped and queued again" if now else
        "stopping: running trials finish and are recorded first")
    started = time.monotonic()
    last, local = "", set()
    while True:
        live = _live(study)
        local |= {w.pid for w in live if w.local}
        if not live:  # each has recorded its exit; let the processes end too
            wait_gone(sorted(local), 30.0)
            _reap(study, say)
            return []
        waited = time.monotonic() - started
        if now and waited >= kill_after_s:
            for w in live:
                if w.local:
                    say(f"worker {w.id} still there after {kill_after_s:.0f} s: killed")
                    _kill(w)
        if timeout_s is not None and waited >= timeout_s:
            return live
        line = "; ".join(f"{w.id} trial {w.trial} {w.phase}" if w.trial is not None
                         else f"{w.id} {w.phase}" for w in live)
        if line != last:
            say(f"waiting for {len(live)} worker(s): {line}")
            last = line
        time.sleep(0.5)


def _reap(study, say: Callable[[str], None]) -> None:
    """Kill what the study's workers on this host left on their GPUs (none while a
    worker holds the GPU)."""
    gpus = {g for w in views(study.user_attrs, time.time(), heartbeat_s()) if w.local
            for g in w.gpus}
    if killed := orphans.reap_unheld(sorted(gpus)):
        say(f"killed {len(killed)} engine process(es) left by a killed worker "
            f"(pids {killed})")


def wait_gone(pids: list[int], timeout_s: float) -> bool:
    """True once none of these local processes lives."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(proctree.alive(p) for p in pids):
            return True
        time.sleep(0.2)
    return not any(proctree.alive(p) for p in pids)

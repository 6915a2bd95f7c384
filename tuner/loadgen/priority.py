"""The client's CPU priority: real-time scheduling for the thread that runs the requests.

On a machine whose cores the server saturates (vLLM's CPU build on two cores, or a GPU box
whose API server and other jobs share the client's cores), a client at normal priority can
wait hundreds of milliseconds for a core while it has a token to stamp: its loop lag then
says the run measured the client, and the run is refused (``lag.judge``). Real-time
scheduling removes that wait where nice does not (measured in docs/loadgen.md, "A client
that waits for a core").

``realtime(True)`` puts the calling thread on SCHED_FIFO at the lowest real-time priority,
with SCHED_RESET_ON_FORK so that nothing it starts inherits it, and puts the thread back as
it was on exit. The OS grants it to root or to a process with CAP_SYS_NICE (or an
RLIMIT_RTPRIO above 0); elsewhere the run goes on at normal priority and says why. The
client uses a few per cent of a core when it is not the bottleneck, and the kernel keeps
5 % of each second for other work (``sched_rt_runtime_us``), so it cannot starve the server
it measures; a client that is the bottleneck is refused as such whatever its priority.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Iterator

log = logging.getLogger(__name__)

NORMAL, REALTIME = "normal", "realtime"
PRIORITIES = (NORMAL, REALTIME)
LOWEST_FIFO = 1


@dataclass
class Granted:
    """What the thread ran at: ``REALTIME`` or ``NORMAL``; ``refused``: why a real-time
    request was not granted (empty when it was, or when none was asked)."""

    priority: str = NORMAL
    refused: str = ""


@contextlib.contextmanager
def realtime(wanted: bool) -> Iterator[Granted]:
    """Run the block on SCHED_FIFO when ``wanted`` and the OS allows it (see the module)."""
    granted = Granted()
    if not wanted:
        yield granted
        return
    if not hasattr(os, "SCHED_FIFO"):
        granted.refused = "this platform has no real-time scheduling"
        yield granted
        return
    before, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                              os.sched_param(LOWEST_FIFO))
    except OSError as e:
        granted.refused = (f"real-time scheduling refused ({e.strerror}): run as root, give "
                           "the worker CAP_SYS_NICE, or raise its RLIMIT_RTPRIO")
        log.warning("client priority: %s; the client runs at normal priority", granted.refused)
        yield granted
        return
    granted.priority = REALTIME
    try:
        yield granted
    finally:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, before, param)

"""Run a command as a child process and measure what it took: its exit status, output,
wall time and peak resident memory (its own, through ``wait4``: not that of other children
of the test process)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    returncode: int | None  # None: killed at its deadline
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_bytes: int


def run_measured(argv: list[str], timeout_s: float, env: dict[str, str] | None = None,
                 max_memory_bytes: int | None = None, poll_s: float = 0.05) -> Measured:
    """Run ``argv``; at ``timeout_s`` it is killed (``returncode`` None). With
    ``max_memory_bytes`` its address space is capped there (an allocation past it fails),
    so that a command that would take the machine's memory fails alone."""

    def cap() -> None:
        limit = max_memory_bytes or resource.RLIM_INFINITY
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=cap if max_memory_bytes else None)
        start = time.monotonic()
        deadline = start + timeout_s
        killed = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline and not killed:
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
            time.sleep(poll_s)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Measured(None if killed else proc.returncode,
                        out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                        wall, usage.ru_maxrss * 1024)  # Linux reports kilobytes

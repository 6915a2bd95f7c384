"""Ending a test's child process: SIGTERM, a grace period, then SIGKILL."""

from __future__ import annotations

import subprocess


def stopped(proc: subprocess.Popen, grace_s: float) -> bool:
    """SIGTERM ``proc``, then wait up to ``grace_s`` for it to end; True when it did, False
    when it had to be killed (it is gone and reaped either way)."""
    proc.terminate()
    try:
        proc.wait(grace_s)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False

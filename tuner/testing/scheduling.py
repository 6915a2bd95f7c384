"""What this machine lets a test process do with the CPU scheduler."""

from __future__ import annotations

import subprocess
import sys


def realtime_granted() -> bool:
    """Whether this process may take SCHED_FIFO (``tuner.loadgen.priority``): asked in a
    child, which then exits, so the caller's own policy is never touched."""
    code = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0

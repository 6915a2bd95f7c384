"""One supervised server per trial: its own process group, pinned GPUs, a log file, a
health wait that tells "exited with code N" from "not ready within T s", and a stop that
sends SIGTERM, waits a grace period, then SIGKILLs whatever is left of the group."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tuner.errors import EngineExitedError, EngineTimeoutError
from tuner.engine import logparse, proctree
from tuner.engine.command import Launch, engine_environment


PR_SET_PDEATHSIG = 1
# After SIGKILL: how long to wait for the process (and then its group) to be gone; only a
# process stuck in the kernel (D state) takes longer, and then it is left behind.
KILLED_WAIT_S = 10


def _terminate_with_parent() -> None:
    """In the child: get SIGTERM when the worker dies, even by SIGKILL, so that a killed
    worker leaves no server behind (the server then stops its own children)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Server:
    """A server process started from a ``Launch``; use as a context manager."""

    def __init__(self, launch: Launch, port: int, log_path: Path) -> None:
        self.launch, self.port, self.log_path = launch, port, log_path
        self.proc: subprocess.Popen | None = None
        self.pgid: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(self.launch.argv) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(
                list(self.launch.argv), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=engine_environment(os.environ, self.launch),
                start_new_session=True, preexec_fn=_terminate_with_parent)
        self.pgid = self.proc.pid

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def wait_healthy(self, timeout_s: float, poll_s: float = 0.25) -> float:
        """Seconds until /health answered 200; raises EngineExitedError / EngineTimeoutError."""
        start = time.monotonic()
        while True:
            code = self.returncode()
            if code is not None:
                raise EngineExitedError(code, f"server exited with code {code} before it was "
                                        f"ready: {logparse.reason_line(self.log())}")
            if self.healthy():
                return time.monotonic() - start
            if time.monotonic() - start > timeout_s:
                raise EngineTimeoutError(timeout_s, f"server not ready within {timeout_s:.0f} s")
            time.sleep(poll_s)

    def stop(self, grace_s: float = 20.0) -> float:
        """Stop the whole process group; returns the seconds it took. Idempotent."""
        if self.proc is None or self.pgid is None:
            return 0.0
        start = time.monotonic()
        self._signal(signal.SIGTERM)
        deadline = start + grace_s
        while time.monotonic() < deadline and (self.proc.poll() is None or
                                               proctree.in_group(self.pgid)):
            time.sleep(0.05)
        if self.proc.poll() is None or proctree.in_group(self.pgid):
            self._signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=KILLED_WAIT_S)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process in D state
            pass
        while proctree.in_group(self.pgid) and time.monotonic() < start + grace_s + KILLED_WAIT_S:
            time.sleep(0.05)
        return time.monotonic() - start

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

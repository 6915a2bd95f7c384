"""One supervised server per trial: its own process group, pinned GPUs, a log file, a
health wait that tells "exited with code N" from "not ready within T s", and a stop that
sends SIGTERM, waits a grace period, then SIGKILLs whatever is left of the group.

Two seams: a ``Spawn`` starts a process (plainly, or forked from a pre-imported one:
``tuner.engine.preimport``); a ``Starter`` starts an engine and hands back an ``Engine``
that the trial waits on, benchmarks and stops. ``process_starter`` is the product's
``Starter`` (a ``Server`` on a ``Spawn``); an in-process stand-in is another
(``tuner.testing.sim_bench``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

from tuner.errors import EngineExitedError, EngineTimeoutError
from tuner.engine import logparse, orphans, proctree
from tuner.engine.command import Launch, engine_environment


# After SIGKILL: how long to wait for the process (and then its group) to be gone; only a
# process stuck in the kernel (D state) takes longer, and then it is left behind.
KILLED_WAIT_S = 10


class Process(Protocol):
    """A started server: the leader of its own process group (``subprocess.Popen`` is one)."""

    pid: int

    def poll(self) -> int | None:
        """The exit code once it exited (negative: the signal that killed it), else None."""

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; raises ``subprocess.TimeoutExpired`` after ``timeout`` s."""


# argv, the whole environment, the log file (opened for appending) -> the started process
Spawn = Callable[[Sequence[str], Mapping[str, str], Path], Process]


class Engine(Protocol):
    """A started engine, as a trial sees it: where it serves, whether it exited, its log,
    a wait until it is ready and a stop (``Server`` is one)."""

    url: str
    log_path: Path

    def returncode(self) -> int | None:
        """The exit code once it exited, else None."""

    def log(self) -> str:
        """Its log so far ("" when none can be read)."""

    def wait_healthy(self, timeout_s: float) -> float:
        """Seconds from its start until it serves; EngineExitedError when it exited first,
        EngineTimeoutError after ``timeout_s``."""

    def stop(self, grace_s: float) -> float:
        """Stop it and everything it started; the seconds that took. Idempotent."""


class Starter(Protocol):
    """Starts the engine of ``launch`` on ``port`` with its log at ``log_path``, owning
    ``gpus`` while it runs; the engine is started when the call returns."""

    def __call__(self, launch: Launch, port: int, log_path: Path,
                 gpus: Sequence[int]) -> Engine: ...


def plain_start(argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen:
    """Spawn ``argv`` in a new session, stdin from /dev/null, stdout and stderr to the log."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=dict(env), start_new_session=True, preexec_fn=proctree.terminate_with_parent)


class Server:
    """A server process started from a ``Launch``; use as a context manager. With
    ``gpus``, its process group is recorded beside their locks while it runs
    (``tuner.engine.orphans``), for the next worker there to reap if this one is killed."""

    def __init__(self, launch: Launch, port: int, log_path: Path,
                 starter: Spawn = plain_start, gpus: Sequence[int] = ()) -> None:
        self.launch, self.port, self.log_path = launch, port, log_path
        self.starter, self.gpus = starter, tuple(gpus)
        self.proc: Process | None = None
        self.pgid: int | None = None
        self.group: orphans.Group | None = None
        self.started_at: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(self.launch.argv) + "\n").encode())
        self.started_at = time.monotonic()
        self.proc = self.starter(self.launch.argv, engine_environment(os.environ, self.launch),
                                 self.log_path)
        self.pgid = self.proc.pid
        self.group = orphans.Group.of(self.pgid) if self.gpus else None
        if self.group is not None:
            orphans.record(self.gpus, self.group)

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
        """Seconds from ``start()`` until /health answered 200 (a starter that waits, e.g. for
        its supervisor's imports, counts); raises EngineExitedError / EngineTimeoutError."""
        start = self.started_at if self.started_at is not None else time.monotonic()
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
        if self.group is not None and not proctree.in_group(self.pgid):
            orphans.forget(self.gpus, self.group)
        return time.monotonic() - start

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def process_starter(spawn: Spawn = plain_start) -> Starter:
    """The ``Starter`` of a supervised process (``Server``) started by ``spawn``."""
    def start(launch: Launch, port: int, log_path: Path, gpus: Sequence[int]) -> Server:
        server = Server(launch, port, log_path, starter=spawn, gpus=gpus)
        server.start()
        return server
    return start

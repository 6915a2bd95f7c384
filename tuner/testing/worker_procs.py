"""Helpers for tests that run real `tuner worker` processes: start, watch, signal, and
record the server processes they start (to compare running flags with trial params)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from tuner.engine import proctree
from tuner.testing.cli_fork import ForkedTuner, start_tuner


def start_worker(study: str, storage: str, gpus: str = "0", *extra: str,
                 env: dict | None = None,
                 log: Path | None = None) -> ForkedTuner | subprocess.Popen:
    """`tuner worker STUDY --storage STORAGE --gpus GPUS EXTRA...` in its own session, with
    this process's environment and ``env`` over it, its output (both streams) appended to
    ``log`` (default: discarded); as ``cli_fork.start_tuner`` starts it."""
    return start_tuner(["worker", study, "--storage", storage, "--gpus", gpus, *extra],
                       env={**os.environ, **(env or {})}, stdout=log or os.devnull)


class ServerWatcher:
    """Polls the process tree below some roots and keeps every server command line seen:
    ``seen`` by pid, ``servers()`` one per process (by pid and start time, as a busy machine
    with a small pid_max, thread ids drawn from the same space, may give a later server the
    pid of an earlier one)."""

    def __init__(self, roots: list[int], marker: str = "serve") -> None:
        self.roots, self.marker = roots, marker
        self.seen: dict[int, list[str]] = {}
        self._runs: dict[tuple[int, int | None], list[str]] = {}
        self._error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "ServerWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.1):
                for pid in proctree.descendants(*self.roots):
                    key = (pid, proctree.started(pid))
                    if key[1] is not None and key not in self._runs:  # None: gone
                        argv = proctree.cmdline(pid)
                        if self._is_server(argv):
                            self._runs[key] = self.seen[pid] = argv
        except Exception as e:  # said by servers(): a watcher that stopped saw too little
            self._error = e

    def _is_server(self, argv: list[str]) -> bool:
        return "--port" in argv and self.marker in argv

    def serving(self) -> bool:
        """A server runs below the roots now (read from the process table, not ``seen``)."""
        return any(self._is_server(proctree.cmdline(pid))
                   for pid in proctree.descendants(*self.roots))

    def servers(self) -> list[list[str]]:
        """Every server command line seen, one per process; a RuntimeError when the
        watcher stopped on an error (it would have missed the servers after it)."""
        if self._error is not None:
            raise RuntimeError(f"the server watcher stopped: {self._error!r}")
        return list(self._runs.values())


def wait_for(predicate, timeout_s: float, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    return predicate()


def stop(pid: int, log: Path | None = None, sig: int = signal.SIGTERM,
         timeout_s: float = 60) -> None:
    """Signal a worker and wait until it is gone; if it is not, fail with where it is (its
    threads' stacks, asked with SIGUSR1, see `tuner.cli.worker`) and the tail of its log."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    if wait_for(lambda: not proctree.alive(pid), timeout_s):
        return
    _still_running(pid, log, sig, timeout_s)


def interrupt(proc: subprocess.Popen, sig: int = signal.SIGINT, timeout_s: float = 60,
              log: Path | None = None) -> int:
    """Signal a worker started by ``start_worker`` and return its exit code; if it has not
    exited within ``timeout_s``, fail as ``stop`` does, with its stacks and log tail."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        if proc.poll() is not None:  # it exited just as the time ran out (a zombie till
            return proc.returncode   # reaped: SIGUSR1 would still reach it)
        _still_running(proc.pid, log, sig, timeout_s)
        return proc.wait(timeout=5)


def _still_running(pid: int, log: Path | None, sig: int, timeout_s: float) -> None:
    """Ask a worker that outlived its stop where it is (SIGUSR1) and fail with its log."""
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        return
    time.sleep(2)
    tail = log.read_text(errors="replace")[-6000:] if log and log.exists() else "(no log)"
    raise AssertionError(f"worker {pid} did not stop within {timeout_s:.0f} s of signal "
                         f"{sig}; its log ends:\n{tail}")

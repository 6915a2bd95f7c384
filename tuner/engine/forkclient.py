"""The worker's side of the pre-imported supervisor (``forkserver.py``): start it, send it
requests, and follow a forked child's exit code through it.

Standard library only (and ``proctree``), so that a GPU script can use it with nothing but
the engine's Python and this repo on PYTHONPATH (``scripts/gpu/start_paths.py``).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from tuner.engine import proctree

SCRIPT = Path(__file__).with_name("forkserver.py")
# Read by C code as a library loads (the dynamic loader, Python itself, OpenMP, BLAS,
# malloc, libtorch's static initialisers), which the supervisor's recording of os.environ
# cannot see: a trial must match the supervisor on all of them.
LOAD_TIME = ("LD_", "PYTHON", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "MALLOC_",
             "TORCH", "PYTORCH_")
# How long the supervisor's import may take (the first start of a slot waits for it).
READY_TIMEOUT_S = 600.0
REPLY_TIMEOUT_S = 30.0
# The exit code of a child whose supervisor died before it could report the real one.
UNKNOWN_EXIT = 255


class ForkServerError(Exception):
    """The supervisor could not be started or did not answer (internal: means fall back)."""


class ForkServer:
    """One running ``forkserver.py``: its process, the socket and its ready message."""

    def __init__(self, python: str, module: str, env: Mapping[str, str], log_path: Path,
                 timeout_s: float = READY_TIMEOUT_S, also: Sequence[str] = ()) -> None:
        self.python, self.module, self.env = python, module, dict(env)
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair()
        try:
            with open(log_path, "ab") as out:
                self.proc = subprocess.Popen(
                    [python, str(SCRIPT), "--fd", str(theirs.fileno()), "--module", module,
                     *(a for name in also for a in ("--also", name))],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    env=self.env, pass_fds=(theirs.fileno(),), start_new_session=True,
                    preexec_fn=proctree.terminate_with_parent)
        except OSError as e:
            ours.close()
            raise ForkServerError(f"cannot run {python}: {e}") from e
        finally:
            theirs.close()
        self.sock = ours
        self.reader = ours.makefile("r", encoding="utf-8")
        self.ready = self._receive(timeout_s)
        if not self.ready.get("ready"):
            self.close()
            raise ForkServerError(self.ready.get("error", f"not ready: {self.ready}"))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, message: Mapping[str, Any]) -> dict:
        """Send one request, return its reply; ``ForkServerError`` when it cannot."""
        with self.lock:
            try:
                self.sock.sendall((json.dumps(message) + "\n").encode())
            except OSError as e:
                raise ForkServerError(f"supervisor gone: {e}") from e
            return self._receive(REPLY_TIMEOUT_S)

    def _receive(self, timeout_s: float) -> dict:
        self.sock.settimeout(timeout_s)
        try:
            line = self.reader.readline()
        except OSError as e:  # a timeout, or the connection broke: this one is done for
            self.proc.kill()
            raise ForkServerError(f"no answer from the supervisor: {e!r}") from e
        if not line:
            code = self.proc.poll()
            raise ForkServerError(f"supervisor exited (code {code})")
        return json.loads(line)

    def close(self, grace_s: float = 5.0) -> None:
        """End of file tells it to exit; SIGKILL after ``grace_s``. Its children are not
        touched (each one's Server stops it)."""
        self.reader.close()
        self.sock.close()
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_reaped_cpu_s = 0.0


def reaped_cpu_s() -> float:
    """CPU seconds of every forked process whose exit this process has seen (its supervisor
    reaped it, with the descendants it reaped itself): what ``resource.RUSAGE_CHILDREN``
    would count had this process started them."""
    return _reaped_cpu_s


class ForkedProcess:
    """A process forked by a ``ForkServer``: its exit code and CPU seconds (``cpu_s``, once
    it has exited) come from there."""

    def __init__(self, pid: int, server: ForkServer) -> None:
        self.pid, self.server = pid, server
        self.code: int | None = None
        self.cpu_s: float | None = None

    def poll(self) -> int | None:
        global _reaped_cpu_s
        if self.code is None:
            try:
                reply = self.server.request({"op": "poll", "pid": self.pid})
            except ForkServerError:  # the supervisor died: its children got SIGTERM
                self.code = None if proctree.alive(self.pid) else UNKNOWN_EXIT
                return self.code
            self.code, self.cpu_s = reply["code"], reply.get("cpu_s")
            _reaped_cpu_s += self.cpu_s or 0.0
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.05)
        return code


def module_launch(argv: Sequence[str]) -> tuple[str, str] | None:
    """(python, module) of a ``PYTHON -m MODULE ...`` launch, else None."""
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[0], argv[2]
    return None


# Set by the interpreter itself as it starts, before any import: PEP 538's locale coercion
# puts LC_CTYPE (C.UTF-8 or the like) into the environment when LC_ALL is unset and the
# LC_CTYPE locale is C or POSIX; these name what decides it.
COERCED = "LC_CTYPE"
COERCION_INPUTS = ("LC_ALL", "LC_CTYPE", "LANG")


def as_started(ready: Mapping[str, Any], supervisor_env: Mapping[str, str],
               env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as a fresh interpreter would hold it once started: with ``LC_CTYPE`` as the
    supervisor's interpreter coerced it, where the supervisor was started without one
    (``supervisor_env``) and ``env`` agrees with it on every name that decides the
    coercion; otherwise ``env`` unchanged."""
    coerced = (ready.get("env_read") or {}).get(COERCED)
    if (coerced is None or COERCED in supervisor_env
            or any(env.get(k) != supervisor_env.get(k) for k in COERCION_INPUTS)):
        return dict(env)
    return {**env, COERCED: coerced}


def env_refusal(ready: Mapping[str, Any], supervisor_env: Mapping[str, str],
                env: Mapping[str, str]) -> str | None:
    """Why a trial with environment ``env`` must not be forked from a supervisor started
    with ``supervisor_env`` whose import read ``ready["env_read"]``; None when it may."""
    read = dict(ready.get("env_read") or {})
    differ = sorted(k for k, v in read.items() if env.get(k) != v)
    differ += sorted(k for k in set(env) | set(supervisor_env)
                     if k.startswith(LOAD_TIME) and k not in read
                     and env.get(k) != supervisor_env.get(k))
    if differ:
        return f"the environment differs in {', '.join(differ)}, read at import"
    return None

"""`tuner ARGS` as a process forked from one that imported tuner's layers once.

Most of the CPU a short `tuner` command spends is importing Optuna, SQLAlchemy and the
layers above them (about a second each time); the suite runs such commands hundreds of
times to check exit codes and error lines. ``run_tuner`` asks a supervisor of this test
process (the engine's own ``forkserver.py``, started on first use with those layers
imported) to fork a child that runs ``python -m tuner ARGS`` as a fresh process would:
its own process, session, working folder and whole environment, stdin from /dev/null,
stdout and stderr in files of their own, exiting through the interpreter's shutdown.

It runs a plain ``python -m tuner`` instead, as ``subprocess.run`` would, when the fork
could differ from one: the environment differs from the supervisor's in a name outside
``MAY_DIFFER``, the caller is not the main thread, or the supervisor is gone. tuner reads
its own settings when a command runs, never at import (``tuner.settings``), while the
imports read other names (tqdm reads the whole environment), so only ``TUNER_*`` and
pytest's name of the running test may differ. Tests about the entry point itself, stdin or
a process's limits start their own process.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Mapping, Sequence

from tuner.engine.forkclient import ForkedProcess, ForkServer, ForkServerError

# What a command imports when it runs, imported once by the supervisor.
PRELOAD = ("tuner.storage", "tuner.search", "tuner.runner", "tuner.results", "tuner.service")
MODULE = "tuner"
# Names a child's environment may set otherwise than the supervisor's: read when a command
# runs, or by nothing in the child.
MAY_DIFFER = ("TUNER_", "PYTEST_CURRENT_TEST")

_lock = threading.Lock()
_state: dict[str, object] = {}


def _supervisor() -> ForkServer | None:
    """This process's supervisor, started on first use (again if it died); None when it
    cannot start, or when this is not the main thread: the supervisor gets SIGTERM when
    the thread that started it ends (``proctree.terminate_with_parent``)."""
    with _lock:
        server = _state.get("server")
        if isinstance(server, ForkServer) and server.alive():
            return server
        if threading.current_thread() is not threading.main_thread():
            return None
        folder = Path(tempfile.mkdtemp(prefix="tuner-cli-fork-"))
        atexit.register(shutil.rmtree, folder, True)  # runs last: after the close below
        try:
            server = ForkServer(sys.executable, MODULE, dict(os.environ),
                                folder / "supervisor.log", also=PRELOAD)
        except ForkServerError:
            _state["server"] = None
            return None
        _state["server"] = server
        atexit.register(server.close)
        return server


class ForkedTuner:
    """A forked `tuner` process with the part of ``subprocess.Popen`` that tests use: ``pid``,
    ``returncode``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``."""

    def __init__(self, args: list[str], child: ForkedProcess) -> None:
        self.args, self.child, self.pid = args, child, child.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.child.poll()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = self.child.wait(timeout)
            except subprocess.TimeoutExpired:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_tuner(args: Sequence[object], *, env: Mapping[str, str] | None = None,
                cwd: str | Path | None = None, stdout: str | Path = os.devnull,
                stderr: str | Path | None = None) -> ForkedTuner | subprocess.Popen:
    """Start `tuner ARGS` with ``env`` (default: this process's) in ``cwd``, its own session,
    stdin from /dev/null, stdout appended to the file ``stdout`` and stderr to ``stderr``
    (None: with stdout). A ``ForkedTuner``, or a ``subprocess.Popen`` of ``python -m tuner``
    where a fork could differ from a fresh process."""
    words = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    server = _supervisor()
    if server is not None and _may_fork(server.env, env):
        argv = [sys.executable, "-m", MODULE, *words]
        request = {"op": "start", "argv": argv, "env": env, "log": str(stdout),
                   "cwd": str(cwd or os.getcwd())}
        if stderr is not None:
            request["stderr"] = str(stderr)
        try:
            reply = server.request(request)
        except ForkServerError:
            reply = {}
        if "pid" in reply:
            return ForkedTuner(argv, ForkedProcess(int(reply["pid"]), server))
    with open(stdout, "ab") as out, open(stderr or os.devnull, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "tuner", *words], env=env, cwd=cwd,
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err if stderr is not None else subprocess.STDOUT,
                                start_new_session=True, preexec_fn=default_sigint)


def run_tuner(args: Sequence[object], *, env: Mapping[str, str] | None = None,
              cwd: str | Path | None = None,
              timeout: float | None = 60.0) -> subprocess.CompletedProcess:
    """Run `tuner ARGS` as ``start_tuner`` starts it; its exit code, stdout and stderr
    (text), as ``subprocess.run(..., capture_output=True, text=True)`` returns them.
    ``subprocess.TimeoutExpired`` past ``timeout`` s, with the child's session killed."""
    with tempfile.TemporaryDirectory(prefix="tuner-cli-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        proc = start_tuner(args, env=env, cwd=cwd, stdout=out, stderr=err)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait(30)
            raise subprocess.TimeoutExpired(proc.args, timeout, out.read_text(errors="replace"),
                                            err.read_text(errors="replace")) from None
        return subprocess.CompletedProcess(proc.args, code, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))


def _may_fork(supervisor_env: Mapping[str, str], env: Mapping[str, str]) -> bool:
    """Whether a child with ``env`` starts as a fresh process would: only ``TUNER_*``
    names (and pytest's name of the running test) differ from the supervisor's
    environment."""
    return all(k.startswith(MAY_DIFFER) for k in set(env) | set(supervisor_env)
               if env.get(k) != supervisor_env.get(k))


def default_sigint() -> None:
    """A `tuner` process answers Ctrl-C whatever the test process does with it: an ignored
    SIGINT (as something in the full suite leaves it) is inherited across exec, and Python
    then never turns SIGINT into KeyboardInterrupt. (A forked child sets its own.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _kill_group(pid: int) -> None:
    """The child leads its own session (as the supervisor forks it): kill all of it."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

"""The pre-imported server supervisor ("forkserver"): runs in the engine's own Python.

Started by ``tuner.engine.preimport`` as ``ENGINE_PYTHON forkserver.py --fd N --module M``
(this file by path, so it needs nothing but the standard library; tuner is not installed
in the engine's Python). It imports ``M`` (vLLM's API server module, and with it torch)
once, without touching CUDA, then forks one child per request. ``--also A`` (repeatable)
imports ``A`` first, with the same recording: what ``M`` imports only when it runs. A
child runs ``python -m M ARGS`` as a fresh process would: its own session and process
group, its environment replaced by the trial's, stdin from /dev/null, stdout and stderr to
the trial's log, its working folder first on ``sys.path``, ``sys.argv`` set and ``M``
executed as ``__main__`` (``runpy``), exiting through the interpreter's normal shutdown.

Protocol: one JSON object per line on the socket ``--fd`` (both ways), one reply per
request, in order.

    -> (on start)  {"ready": true, "pid": P, "import_s": S, "env_read": {NAME: VALUE|null},
                    "env_written": {NAME: VALUE|null}, "env_listed": bool,
                    "cuda_initialized": false, "threads": 1}
                   or {"error": "..."} and exit 1 (e.g. CUDA was initialised by the import)
    <- {"op": "start", "argv": [...], "env": {...}, "log": PATH, "cwd": DIR,
        "stderr": PATH}   (optional: stderr apart from the log, which then gets stdout)
    -> {"pid": CHILD} or {"error": "..."}
    <- {"op": "poll", "pid": CHILD}
    -> {"code": null}  while it runs, else its exit code (negative: killed by that signal)

``env_read`` is every environment variable the import read through ``os.environ`` (with
its value before the import; null: unset): a trial whose environment differs there must
not use this process (vLLM reads some settings at import, e.g. ``VLLM_BATCH_INVARIANT``,
``VLLM_USE_MODELSCOPE`` and its logger's). ``env_written`` is what the import set (null:
removed); a child applies it over the trial's environment, as the import would have.
``env_listed`` says the import iterated over the whole environment. The supervisor reaps
its children on SIGCHLD and keeps their codes; it exits at the socket's end of file, and
gets SIGTERM when the worker dies (the worker's PDEATHSIG); a child gets SIGTERM when the
supervisor dies.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import runpy
import signal
import socket
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


class _RecordingEnviron(os._Environ):
    """``os.environ`` that remembers which names were read (it shares the real mapping)."""

    def __init__(self, real: os._Environ) -> None:
        super().__init__(real._data, real.encodekey, real.decodekey,
                         real.encodevalue, real.decodevalue)
        self.read: set[str] = set()
        self.listed = False

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def __iter__(self):
        self.listed = True
        return super().__iter__()


def preimport(module: str, also: tuple[str, ...] = ()) -> dict:
    """Import ``also``, then ``module``, with env reads recorded; the ready message (or an
    error)."""
    before = dict(os.environ)
    recorder = _RecordingEnviron(os.environ)
    os.environ = recorder  # os.getenv and `from os import environ` see it from now on
    t0 = time.monotonic()
    for name in (*also, module):
        importlib.import_module(name)
    import_s = time.monotonic() - t0
    torch = sys.modules.get("torch")
    cuda = bool(torch is not None and torch.cuda.is_initialized())
    read = sorted(k for k in recorder.read if isinstance(k, str))
    listed = recorder.listed
    after = dict(os.environ)
    message = {"ready": not cuda, "pid": os.getpid(), "import_s": round(import_s, 3),
               "env_read": {k: before.get(k) for k in read},
               "env_written": {k: after.get(k) for k in set(before) | set(after)
                               if before.get(k) != after.get(k)},
               "env_listed": listed, "cuda_initialized": cuda,
               "threads": threading.active_count()}
    if cuda:
        message["error"] = f"importing {module} initialised CUDA: a fork would inherit it"
    return message


class Supervisor:
    """The request loop: start children, report their exit codes and CPU seconds."""

    def __init__(self, sock: socket.socket, module: str) -> None:
        self.sock, self.module = sock, module
        self.env_written: dict[str, str | None] = {}
        self.reader = sock.makefile("r", encoding="utf-8")
        self.codes: dict[int, int] = {}
        self.cpu_s: dict[int, float] = {}
        self.children: set[int] = set()

    def reap(self, *_sig) -> None:
        for pid in list(self.children):
            try:
                done, status, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                self.children.discard(pid)
                continue
            if done:
                self.children.discard(pid)
                self.codes[pid] = os.waitstatus_to_exitcode(status)
                # the child's own CPU and that of the descendants it reaped
                self.cpu_s[pid] = round(usage.ru_utime + usage.ru_stime, 3)

    def send(self, message: dict) -> None:
        self.sock.sendall((json.dumps(message) + "\n").encode())

    def serve(self) -> dict | None:
        """Answer requests until end of file; in a forked child, return its request."""
        signal.signal(signal.SIGCHLD, self.reap)
        for line in self.reader:
            request = json.loads(line)
            if request.get("op") == "start":
                pid = os.fork()
                if pid == 0:
                    return request
                self.children.add(pid)
                self.send({"pid": pid})
            elif request.get("op") == "poll":
                self.reap()
                pid = int(request["pid"])
                self.send({"code": self.codes.get(pid), "cpu_s": self.cpu_s.get(pid)})
            else:
                self.send({"error": f"unknown request {request!r}"})
        return None


def become_trial(request: dict, supervisor: Supervisor) -> None:
    """In the forked child: turn into ``python -m module ARGS`` for the trial; never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # the protocol socket is the supervisor's alone: a child holding it would keep the
    # worker from seeing the supervisor's end
    supervisor.reader.close()
    os.close(supervisor.sock.detach())
    module = supervisor.module
    os.setsid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    null = os.open(os.devnull, os.O_RDONLY)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    log = os.open(request["log"], flags, 0o644)
    err = os.open(request["stderr"], flags, 0o644) if request.get("stderr") else log
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(err, 2)
    for fd in {null, log, err}:
        os.close(fd)
    if request.get("cwd"):
        os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # as `python -m` puts it
    # the trial's environment, then what the import set in the supervisor's (vLLM sets
    # e.g. TORCHINDUCTOR_COMPILE_THREADS when imported, in a plain start too)
    os.environ.clear()
    os.environ.update(request["env"])
    for name, value in supervisor.env_written.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    argv = list(request["argv"])
    # `python -m M` runs M as __main__, a module apart from the imported M: drop the
    # imported copy so that runpy does the same (its dependencies stay imported). For a
    # package, `-m` runs its __main__ and keeps the package itself.
    imported = sys.modules.get(module)
    sys.modules.pop(f"{module}.__main__" if hasattr(imported, "__path__") else module, None)
    sys.argv = [argv[0], *argv[3:]]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        raise
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
    sys.exit(0)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--module", required=True)
    p.add_argument("--also", action="append", default=[])
    args = p.parse_args()
    # Run as a file, Python put this folder first on sys.path; `python -m` puts the cwd.
    sys.path[0] = os.getcwd()
    sock = socket.socket(fileno=args.fd)
    supervisor = Supervisor(sock, args.module)
    try:
        ready = preimport(args.module, tuple(args.also))
    except BaseException as e:  # the engine's import failed: say so and stop
        supervisor.send({"error": f"importing {args.module} failed: {e!r}"})
        return 1
    supervisor.env_written = ready["env_written"]
    supervisor.send(ready)
    if not ready["ready"]:
        return 1
    request = supervisor.serve()
    if request is None:
        return 0
    become_trial(request, supervisor)
    return 0  # pragma: no cover - become_trial exits


if __name__ == "__main__":
    sys.exit(main())

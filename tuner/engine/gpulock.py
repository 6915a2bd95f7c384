"""One worker per GPU on a box: an exclusive ``flock`` on ``$TUNER_HOME/gpus/<id>.lock``,
held for the worker's whole life, whatever study it runs.

The kernel drops the lock when the last descriptor of it closes, so a worker killed by
SIGKILL frees its GPUs at once; nothing is ever left to clean up. The file holds its
holder (pid, study, host, since) as JSON so that a refusal can name it. `tuner launch`
takes the locks itself, before it starts any worker, and hands the open descriptors to
the worker it starts (``TUNER_GPU_LOCK_FDS``): two launches at the same moment cannot
both pass the check.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from tuner.errors import LaunchError
from tuner.settings import settings
from tuner.home import writable_folder

INHERITED_FDS = "TUNER_GPU_LOCK_FDS"  # "gpu:fd,gpu:fd" from the launching process


class GpuBusyError(LaunchError):
    """A GPU is held by another worker on this box."""


def lock_path(gpu: int) -> Path:
    return settings().home / "gpus" / f"{gpu}.lock"


# The holder writes its name into the file just after it takes the lock: a refusal in
# between reads an empty (or half-written) file, so it reads again for this long.
HOLDER_WRITE_S = 1.0


def _holder_info(gpu: int) -> dict:
    try:
        info = json.loads(lock_path(gpu).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def holder(gpu: int) -> str:
    """Who holds ``gpu``'s lock, in words (from the lock file)."""
    deadline = time.monotonic() + HOLDER_WRITE_S
    info = _holder_info(gpu)
    while not info and time.monotonic() < deadline:
        time.sleep(0.02)
        info = _holder_info(gpu)
    if not info:
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since", 0)))
    return f"pid {info.get('pid')} (study {info.get('study')}, since {since})"


@dataclass
class GpuLocks:
    """The locks of some GPUs, taken together or not at all; a context manager."""

    gpus: tuple[int, ...]
    study: str
    fds: dict[int, int] = field(default_factory=dict)

    def acquire(self) -> "GpuLocks":
        inherited = _inherited()
        try:
            for g in sorted(self.gpus):
                self.fds[g] = inherited.pop(g, None) or _open(g)
                try:
                    fcntl.flock(self.fds[g], fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise GpuBusyError(f"GPU {g} is held by worker {holder(g)} on this host; "
                                       f"stop it (`tuner stop {_study_of(g)}`) or choose "
                                       "other GPUs") from None
                self._write(g)
            for fd in inherited.values():  # handed over for GPUs this worker does not own
                os.close(fd)
        except BaseException:
            self.release()
            raise
        return self

    def _write(self, gpu: int) -> None:
        fd = self.fds[gpu]
        data = json.dumps({"pid": os.getpid(), "study": self.study,
                           "host": socket.gethostname(), "since": time.time()}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    def handover(self) -> tuple[dict[str, str], tuple[int, ...]]:
        """(environment, descriptors to pass) for a child worker that takes these locks
        over: the lock stays held while either process has the descriptor open."""
        env = {INHERITED_FDS: ",".join(f"{g}:{fd}" for g, fd in self.fds.items())}
        return env, tuple(self.fds.values())

    def release(self) -> None:
        for fd in self.fds.values():
            os.close(fd)  # the lock goes with the last descriptor
        self.fds.clear()

    def __enter__(self) -> "GpuLocks":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _open(gpu: int) -> int:
    path = lock_path(gpu)
    writable_folder(path.parent, "the GPU locks", LaunchError)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise LaunchError(f"cannot open the GPU lock {path}: {e.strerror}") from e


def _study_of(gpu: int) -> str:
    try:
        return json.loads(lock_path(gpu).read_text()).get("study") or "STUDY"
    except (OSError, ValueError, AttributeError):
        return "STUDY"


def _inherited() -> dict[int, int]:
    """Lock descriptors handed over by `tuner launch`, each checked to be that GPU's file;
    the variable is removed so that nothing this worker starts sees it."""
    text = os.environ.pop(INHERITED_FDS, "")
    out: dict[int, int] = {}
    for item in filter(None, text.split(",")):
        gpu, _, fd = item.partition(":")
        try:
            g, f = int(gpu), int(fd)
            same = os.path.samestat(os.fstat(f), os.stat(lock_path(g)))
        except (ValueError, OSError):
            continue
        if same:
            os.set_inheritable(f, False)
            out[g] = f
    return out

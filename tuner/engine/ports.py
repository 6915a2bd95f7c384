"""A free TCP port on loopback for a trial's server, reserved among this box's workers.

A port that the OS calls free is free only until someone binds it, and a server binds it
long after it is chosen (vLLM, after its imports). Two workers on one box that draw the
same port in that window would both start a server on it: one fails to bind, and its
worker's health check meanwhile answers from the other's server, so it measures the wrong
flags. ``reserved_port`` holds an exclusive ``flock`` on ``<port>.lock`` in the box's
folder of port locks (``locks_folder``) from the draw until the block ends, and draws
again while another process holds the port's lock. As with the GPU locks, the kernel
drops a lock when its holder dies, so nothing is left to clean up; the file is removed
when its block ends. The folder is the box's, not ``$TUNER_HOME``'s: ports are shared by
every process of the box, whatever home its worker uses.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from tuner.errors import LaunchError
from tuner.home import writable_folder

DRAWS = 64  # ports drawn before giving up (each one drawn is held by a live worker)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that no socket on ``host`` holds now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def locks_folder() -> Path:
    """The box's folder of port locks, one per user (in the system's temporary folder)."""
    return Path(tempfile.gettempdir()) / f"tuner-ports-{os.getuid()}"


@contextlib.contextmanager
def reserved_port(draw: Callable[[], int] = free_port,
                  folder: Path | None = None) -> Iterator[int]:
    """A port from ``draw`` whose lock in ``folder`` (default ``locks_folder()``) this
    process holds until the block ends; ports whose lock another process holds are drawn
    again. LaunchError when ``DRAWS`` draws in a row are all held, or the folder cannot be
    written."""
    folder = writable_folder(folder or locks_folder(), "the port locks", LaunchError,
                             remedy="set TMPDIR to a writable folder")
    for _ in range(DRAWS):
        port = draw()
        fd = _lock(folder / f"{port}.lock")
        if fd is None:
            continue
        try:
            yield port
        finally:
            _unlock(folder / f"{port}.lock", fd)
        return
    raise LaunchError(f"{DRAWS} ports drawn in a row are all held by other workers on this "
                      f"box (locks in {folder})")


def _lock(path: Path) -> int | None:
    """The descriptor of ``path`` locked by this process, or None when another holds it.
    A file removed (by its last holder) between open and lock is not the lock any more:
    it is opened again."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _unlock(path: Path, fd: int) -> None:
    """Remove the file while it is still locked (so no one locks it after), then close."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.close(fd)

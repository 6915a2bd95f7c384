"""One worker at a time between the budget check and the claim of its next trial.

A worker reads how much of the study's budget is spent, then asks Optuna for a trial,
which becomes RUNNING (and so counted) in another transaction. Two workers that both read
"one trial left" both ran one (issue 47 case 8: 8 trials of a budget of 7 with four
workers). ``ClaimLock`` makes the check and the ask one step: it is taken before the check
and given back once the new trial is RUNNING in the storage, before the sampler proposes
its parameters (so the sampler's work is not serialised).

The lock lives where the study does, so it holds across processes and hosts:
PostgreSQL: a session advisory lock keyed by the study's name, on a connection of its own
(a worker that dies drops its connection and so the lock). SQLite: an exclusive ``flock``
on the database file itself, opened read-only (a SQLite file is shared by the processes of
one host only; the kernel drops the lock with the process; SQLite's own locks are
``fcntl`` locks, which ``flock`` does not touch on Linux; and a read-only folder or file,
which ``tuner.storage.outage`` reports as a permanent error, does not stop the lock).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from pathlib import Path

import sqlalchemy
import sqlalchemy.pool

from tuner.storage.database import connect_args, sqlite_path

POLL_S = 0.05


def lock_key(study_name: str) -> int:
    """The advisory lock's key for a study: a signed 64-bit number from its name."""
    digest = hashlib.blake2b(f"tuner.claim:{study_name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ClaimLock:
    """``acquire`` waits for the study's claim lock; ``release`` gives it back. Both are
    idempotent. A storage error while acquiring leaves the lock released."""

    def __init__(self, url: str, study_name: str) -> None:
        self.url, self.key = url, lock_key(study_name)
        self._path = sqlite_path(url)
        self._fd: int | None = None
        self._conn: sqlalchemy.Connection | None = None
        self._engine: sqlalchemy.Engine | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None or self._conn is not None

    def acquire(self) -> None:
        if self.held:
            return
        try:
            if self._path is not None:
                self._acquire_file(Path(self._path))
            else:
                self._acquire_advisory()
        except BaseException:
            self.release()
            raise

    def _acquire_file(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def _acquire_advisory(self) -> None:
        # Polled with the non-blocking form: a wait in the server would hold off Ctrl-C.
        if self._engine is None:
            self._engine = sqlalchemy.create_engine(
                self.url, poolclass=sqlalchemy.pool.NullPool, isolation_level="AUTOCOMMIT",
                connect_args=connect_args(self.url))
        self._conn = self._engine.connect()
        query = sqlalchemy.text("SELECT pg_try_advisory_lock(:key)")
        while not self._conn.execute(query, {"key": self.key}).scalar():
            time.sleep(POLL_S)

    def release(self) -> None:
        """Give the lock back: the file's descriptor or the lock's connection is closed."""
        fd, conn = self._fd, self._conn
        self._fd = self._conn = None
        if fd is not None:
            os.close(fd)
        if conn is not None:
            try:
                conn.close()  # the session ends, and the server drops its advisory lock
            except Exception:  # the connection is gone already, and its lock with it
                pass

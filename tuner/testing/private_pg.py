"""A private PostgreSQL server for tests that stop and start the database (outages).

``initdb`` and ``pg_ctl`` come from /usr/lib/postgresql/*/bin; they refuse to run as root,
so as root they run as the ``postgres`` user (``runuser -u postgres --``). The data folder
lies in a fresh folder under the system's temporary directory, owned by that user. The
server listens on 127.0.0.1 on a port of its own and asks for a password over TCP, so
tests can check that passwords never show.

    with PrivatePostgres() as pg:
        url = pg.url          # postgresql+psycopg://postgres:<password>@127.0.0.1:<port>/postgres
        pg.stop(); pg.start() # an outage
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "postgres"


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name))
    return Path(found[-1]).parent if found else None


def unavailable() -> str | None:
    """None when a private server can be started here, else why not."""
    if pg_bin() is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam(USER)
        except KeyError:
            return f"no {USER} user to run PostgreSQL as"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivatePostgres:
    """One PostgreSQL server of our own: ``start``, ``stop``, ``url``, ``close``."""

    def __init__(self, port: int | None = None, max_connections: int = 100) -> None:
        self.port = port or free_port()
        self.password = secrets.token_hex(12)
        self.max_connections = max_connections
        self.root = Path(tempfile.mkdtemp(prefix="tuner-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._bin = pg_bin()

    @property
    def url(self) -> str:
        return (f"postgresql+psycopg://{USER}:{self.password}@127.0.0.1:{self.port}"
                "/postgres")

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []
        done = subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{Path(argv[0]).name} failed: {done.stderr[-2000:]}\n{log}")

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, USER, USER)
        self.root.chmod(0o700)
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            shutil.chown(pwfile, USER, USER)
        self._run(str(self._bin / "initdb"), "-D", str(self.data), "-U", USER,
                  f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                  "--no-sync", "-E", "UTF8")
        pwfile.unlink()

    def start(self) -> None:
        options = (f"-p {self.port} -h 127.0.0.1 -k {self.root} "
                   f"-c max_connections={self.max_connections} -c fsync=off")
        self._run(str(self._bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                  "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``fast`` ends every session now (what an outage looks like)."""
        self._run(str(self._bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def close(self) -> None:
        try:
            if self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "PrivatePostgres":
        try:
            self.init()
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""`tuner api` as a real subprocess on a free loopback port, for tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from tuner.testing.popen import stopped


@contextlib.contextmanager
def api_process(url: str, log, token: str | None = None, timeout_s: float = 90.0,
                stop_s: float = 60.0, args: Sequence[str] = ()):
    """`tuner api --storage URL [ARGS]` on a free loopback port; yields its base URL once it
    accepts connections. On exit it is sent SIGTERM and must end within ``stop_s`` (it is
    killed, and the test fails, when it does not). The bound is wide, for a loaded host;
    a hang still fails."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "TUNER_API_TOKEN"}
    if token:
        env["TUNER_API_TOKEN"] = token
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tuner", "api", "--storage", url,
                                 "--port", str(port), *args], stdout=out, stderr=out, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)
        yield base
    finally:
        ended = stopped(proc, stop_s)
    # after the block: a failure inside it is reported as it was, not as a slow stop
    assert ended, f"tuner api did not stop within {stop_s:.0f} s of SIGTERM: " \
        f"{log.read_text()[-2000:]}"

"""`tuner api` as a real subprocess on a free loopback port, for tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time


@contextlib.contextmanager
def api_process(url: str, log, token: str | None = None, timeout_s: float = 90.0):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "TUNER_API_TOKEN"}
    if token:
        env["TUNER_API_TOKEN"] = token
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tuner", "api", "--storage", url,
                                 "--port", str(port)], stdout=out, stderr=out, env=env)
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
        proc.terminate()
        proc.wait(15)

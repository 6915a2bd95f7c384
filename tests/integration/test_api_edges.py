"""Issue 67, item 5: the edges of `tuner api` and `tuner dashboard`, each a real process
answering real HTTP on loopback (raw requests through ``http.client``, so that each test
says exactly which headers are sent).

Before: the API answered a request whose ``Host`` was any name (a page on a name that its
DNS points at 127.0.0.1, DNS rebinding, read every study); it held a connection that never
finished its request for aiohttp's own keep-alive default (75 s); it served with a
one-character token; and the dashboard answered ``500`` to a request for its static files
that sent no ``Accept-Encoding`` (as scripts and ``curl`` send)."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from tuner.testing.api_procs import api_process
from tuner.testing.studies import make_study

pytestmark = pytest.mark.integration

def raw_get(base: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` with exactly ``headers``: http.client adds neither Host nor
    Accept-Encoding of its own."""
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_the_api_answers_only_requests_addressed_to_this_machine(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    name = make_study(url, "mixed", n=5).spec.name
    with api_process(url, tmp_path / "api.log", args=["--allow-host", "Tuner.Example"]) as base:
        port = urlsplit(base).port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}",
                     f"tuner.example:{port}"):
            status, _, body = raw_get(base, f"/studies/{name}", {"Host": host})
            assert status == 200 and json.loads(body)["study"] == name, (host, body)
        for host in (f"rebound.attacker.example:{port}", f"127.0.0.1.attacker.example:{port}",
                     f"tuner.example.attacker.example:{port}"):
            for path in ("/studies", f"/studies/{name}/best", "/no-such-route"):
                status, headers, body = raw_get(base, path, {"Host": host})
                assert status == 403 and "json" in headers["content-type"], (host, body)
                error = json.loads(body)["error"]
                assert "Host" in error and "--allow-host" in error and name not in error

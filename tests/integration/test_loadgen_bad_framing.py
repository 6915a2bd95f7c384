"""A server whose HTTP framing is broken fails the request at once (reason ``bad_framing``),
over a real socket on loopback, instead of leaving it to its timeout: the scripted server
sends a bad chunk size and then keeps the connection open."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from tuner.loadgen.client import RequestOutput
from tuner.loadgen.http1 import Client, send_fast
from tuner.loadgen.streams import SSEParser

pytestmark = pytest.mark.integration

TOKEN = b'data: {"choices":[{"index":0,"text":"a"}]}\n\n'
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")
REPLIES = {
    "chunk-size": HEAD + b"%x\r\n%s\r\n" % (len(TOKEN), TOKEN) + b"not-hex\r\n",
    "content-length": b"HTTP/1.1 200 OK\r\nContent-Length: 1O\r\n\r\n" + TOKEN,
}


class BrokenReply(threading.Thread):
    """Answers one request with ``reply``, then holds the connection open until released."""

    def __init__(self, reply: bytes) -> None:
        super().__init__(daemon=True)
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.release = threading.Event()

    def run(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            conn.sendall(self.reply)
            self.release.wait(30)


@pytest.mark.parametrize("kind", sorted(REPLIES))
def test_broken_framing_is_a_failed_request_with_its_reason(kind):
    server = BrokenReply(REPLIES[kind])
    server.start()

    async def one() -> RequestOutput:
        # The request's own timeout is far beyond the test's: only the framing can end it.
        client = Client(server.url, timeout_s=120.0)
        loop = asyncio.get_running_loop()
        out = await asyncio.wait_for(send_fast(client, "/v1/completions", b"{}", SSEParser(),
                                               RequestOutput(), loop.time), timeout=60)
        await client.close()
        return out

    try:
        out = asyncio.run(one())
    finally:
        server.release.set()
        server.join(5)
    assert not out.success and out.reason == "bad_framing"
    assert "framing" in out.error

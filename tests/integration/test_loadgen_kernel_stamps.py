"""The fast client's arrival times are the kernel's receive stamps: a client whose event loop
is busy when a token arrives still records when the token reached its socket. Real sockets
on loopback; a server thread writes the reply."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from tuner.loadgen.client import RequestOutput
from tuner.loadgen.http1 import KERNEL_STAMPS, Client, send_fast
from tuner.loadgen.streams import SSEParser

pytestmark = pytest.mark.integration

TOKEN = b'data: {"choices":[{"index":0,"text":"a"}]}\n\n'
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")
BUSY_S = 0.3


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class OneReply(threading.Thread):
    """Answers one request: the head and a token at once, a second token when told to."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.go = threading.Event()
        self.sent: tuple[float, float] | None = None  # just before and just after the send

    def run(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            conn.sendall(HEAD + chunk(TOKEN))
            self.go.wait(10)
            before = time.perf_counter()
            conn.sendall(chunk(TOKEN))
            self.sent = (before, time.perf_counter())
            conn.sendall(b"0\r\n\r\n")


@pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel receive stamps are Linux's")
def test_a_token_that_arrives_while_the_loop_is_busy_keeps_its_arrival_time():
    server = OneReply()
    server.start()

    async def main() -> RequestOutput:
        client = Client(server.url)
        out = RequestOutput(index=0)
        task = asyncio.create_task(send_fast(client, "/v1/completions", b"{}", SSEParser(), out,
                                             time.perf_counter))
        while out.ttft == 0.0 and not task.done():  # the first token is in
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # the kernel switches stamps on shortly after a socket asks
        server.go.set()  # the second token is written now ...
        time.sleep(BUSY_S)  # ... while this loop is busy and reads nothing
        await task
        await client.close()
        return out

    out = asyncio.run(main())
    server.join(5)
    assert out.success and out.chunks == 2 and len(out.itl) == 1, out
    arrived = out.start_time + out.ttft + out.itl[0]
    before, after = server.sent
    assert before - 0.001 <= arrived <= after + 0.05, (arrived - before, after - before)
    # read-time stamps would have put it after the busy spell: at least BUSY_S - 0.05 later

"""The lean HTTP/1.1 response reader, fed scripted bytes: no socket."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.loadgen.client import RequestOutput, StreamTimer
import h11

from tuner.loadgen.http1 import BadFraming, _Response
from tuner.loadgen.streams import SSEParser

pytestmark = pytest.mark.unit

TOKEN = b'data: {"choices":[{"index":0,"text":"a"}],"usage":null}\n\n'
TAIL = b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}}\n\ndata: [DONE]\n\n'


def chunked(*parts: bytes) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n")


def h11_client() -> h11.Connection:
    """A client connection that has sent its request, as ``Client.post_stream`` leaves it."""
    http = h11.Connection(h11.CLIENT)
    http.send(h11.Request(method="POST", target="/v1/completions",
                          headers=[("Host", "x"), ("Content-Length", "0")]))
    http.send(h11.EndOfMessage())
    return http


def read(pieces: list[bytes]) -> tuple[_Response, RequestOutput]:
    loop = asyncio.new_event_loop()
    try:
        out = RequestOutput(start_time=0.0)
        ticks = iter(range(1, 10_000))
        response = _Response(h11_client(), StreamTimer(out, SSEParser()),
                             lambda: float(next(ticks)),
                             loop.create_future())
        for piece in pieces:
            response.feed(piece)
        return response, out
    finally:
        loop.close()


@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=15))
def test_chunked_stream_reads_the_same_however_it_is_cut(cuts):
    raw = chunked(TOKEN, TOKEN + TOKEN, TAIL)
    bounds = sorted({c % len(raw) for c in cuts} | {0, len(raw)})
    response, out = read([raw[a:b] for a, b in zip(bounds, bounds[1:])])
    assert response.done.done() and response.status == 200 and response.keep_alive
    assert out.success and out.chunks == 3 and out.output_tokens == 3 and out.prompt_len == 4
    assert out.latency - out.ttft == sum(out.itl)


def test_error_status_keeps_the_body_and_length_delimited_bodies_end():
    body = b'{"error":"overloaded"}'
    raw = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    response, out = read([raw])
    assert response.done.done() and response.status == 503
    assert response.reason == "Service Unavailable" and response.error_body == body
    assert not out.success


def test_close_delimited_body_ends_with_the_connection():
    raw = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + TOKEN + TAIL
    response, out = read([raw])
    assert not response.done.done()
    response.lost(None)
    assert response.done.done() and out.success and not response.keep_alive


def test_a_cut_chunked_stream_is_an_error():
    raw = chunked(TOKEN, TOKEN, TAIL)
    response, _ = read([raw[:80]])
    response.lost(ConnectionResetError("reset"))
    assert isinstance(response.done.exception(), ConnectionResetError)


@pytest.mark.parametrize("raw", [
    chunked(TOKEN)[:-5] + b"zz\r\n",  # a chunk size that is not hex
    b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n" + TOKEN,
], ids=["chunk-size", "content-length"])
def test_broken_framing_fails_the_response_at_once(raw):
    response, out = read([raw])
    assert response.done.done() and isinstance(response.done.exception(), BadFraming)
    assert not response.keep_alive and not out.success


def test_bytes_after_a_length_delimited_body_keep_the_connection_from_reuse():
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(TOKEN + TAIL)
    response, out = read([raw + TOKEN + TAIL + b"junk"])
    assert response.done.done() and out.success and not response.keep_alive

"""The streaming loop against a scripted clock and a fake session: no server, no socket."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.loadgen.client import RequestOutput, consume, send
from tuner.loadgen.streams import MAX_MESSAGE_BYTES, GenerateParser, SSEParser

pytestmark = pytest.mark.unit


def token(text: str = " a") -> bytes:
    body = {"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": text}],
            "usage": None}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


USAGE = b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n'
DONE = b"data: [DONE]\n\n"


class ScriptedClock:
    """Returns the scripted times in order; exact binary fractions keep arithmetic exact."""

    def __init__(self, times: list[float]) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


async def _aiter(chunks):
    for chunk in chunks:
        yield chunk


def run(chunks: list[bytes], times: list[float], parser=None, start: float = 0.0):
    out = RequestOutput(start_time=start, prompt_len=5)
    asyncio.run(consume(_aiter(chunks), parser or SSEParser(), ScriptedClock(times), out))
    return out


def test_ttft_itl_and_latency_follow_the_token_messages():
    out = run([token(), token(), token(), USAGE + DONE], [0.25, 0.5, 0.625, 0.75])
    assert out.success and out.ttft == 0.25
    assert out.itl == [0.25, 0.125]
    assert out.latency == 0.625  # the usage report and [DONE] do not lengthen it
    assert out.latency - out.ttft == sum(out.itl)
    assert (out.output_tokens, out.prompt_len, out.chunks) == (3, 7, 3)


def test_messages_in_one_read_share_its_timestamp():
    out = run([token() + token(), token() + USAGE + DONE], [0.5, 1.0])
    assert out.ttft == 0.5 and out.itl == [0.0, 0.5]
    assert out.latency - out.ttft == sum(out.itl)


def test_a_message_split_across_reads_counts_when_complete():
    msg = token()
    out = run([msg[:10], msg[10:], DONE], [0.125, 0.25, 0.375])
    assert out.ttft == 0.25 and out.chunks == 1 and out.itl == []


def test_pings_done_and_empty_choices_are_not_tokens():
    out = run([b": ping\n\n", token(), b'data: {"choices":[]}\n\n', token(), DONE],
              [0.125, 0.25, 0.375, 0.5, 0.625])
    assert out.chunks == 2 and out.ttft == 0.25 and out.itl == [0.25]
    assert out.output_tokens == 2  # no usage report: token messages count


def test_spaced_json_and_crlf_take_the_slow_path_with_the_same_result():
    spaced = b'data: {"choices": [{"index": 0, "text": "a"}], "usage": null}\r\n\r\n'
    usage = b'data: {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 9}}\r\n\r\n'
    out = run([spaced, spaced, usage], [0.25, 0.5, 0.75])
    assert out.success and out.chunks == 2 and out.output_tokens == 2 and out.prompt_len == 9


def test_an_error_message_in_the_stream_fails_the_request():
    err = b'data: {"error":{"message":"engine died","code":500}}\n\n'
    out = run([token(), err, DONE], [0.25, 0.5, 0.75])
    assert not out.success and out.reason == "stream_error" and "engine died" in out.error


def test_a_stream_without_tokens_fails_as_no_content():
    out = run([USAGE, DONE], [0.25, 0.5])
    assert not out.success and out.reason == "no_content"


def test_trailing_message_without_blank_line_is_flushed():
    out = run([token(), token()[:-2]], [0.25, 0.5, 0.75])
    assert out.chunks == 2 and out.itl == [0.5]


def test_generate_stream_with_nul_and_newline_separators():
    for sep in (b"\0", b"\n"):
        msgs = [json.dumps({"text": ["p" + " t" * k]}).encode() + sep for k in range(1, 4)]
        out = run([msgs[0], msgs[1] + msgs[2]], [0.25, 0.5], GenerateParser())
        assert out.success and out.chunks == 3 and out.output_tokens == 3
        assert out.ttft == 0.25 and out.itl == [0.25, 0.0] and out.prompt_len == 5


def test_a_long_message_in_many_reads_is_one_token():
    msg = token(" a" * 500_000)
    pieces = [msg[i:i + 4096] for i in range(0, len(msg), 4096)]
    out = run(pieces + [DONE], [0.25] * len(pieces) + [0.5, 0.75])
    assert out.success and out.chunks == 1


@pytest.mark.parametrize("parser,start", [(SSEParser, b"data: "), (GenerateParser, b'{"text"')])
def test_a_message_past_the_cap_fails_the_request_as_oversized(parser, start):
    """Seen in issue 47: a server's endless line was buffered whole (and copied per read)."""
    piece = b"x" * (1 << 16)
    reads = [start + piece] + [piece] * (MAX_MESSAGE_BYTES // len(piece) + 1) + [DONE]
    session = FakeSession(FakeResponse(200, reads))
    out = asyncio.run(send(session, "http://x/v1/completions", b"{}", parser(),
                           RequestOutput(), ScriptedClock([0.0] + [0.25] * len(reads) * 2)))
    assert not out.success and out.reason == "oversized_message", out
    assert str(MAX_MESSAGE_BYTES) in out.error


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
       gaps=st.lists(st.integers(min_value=0, max_value=64), min_size=20, max_size=20))
def test_latency_minus_ttft_is_the_sum_of_itls_however_the_stream_is_cut(cuts, gaps):
    stream = b"".join(token(f"t{i}") for i in range(5)) + USAGE + DONE
    bounds = sorted({c % len(stream) for c in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:])]
    times, t = [], 0.0
    for g in gaps[: len(chunks) + 1]:
        t += g / 64.0  # multiples of 1/64 s: exact in binary floating point
        times.append(t)
    out = run(chunks, times)
    assert out.success and out.chunks == 5 and out.output_tokens == 3
    assert out.latency - out.ttft == sum(out.itl)


class FakeResponse:
    def __init__(self, status: int, chunks: list[bytes], reason: str = "OK") -> None:
        self.status, self.reason, self._chunks = status, reason, chunks
        self.content = self

    def iter_any(self):
        return _aiter(self._chunks)

    async def text(self, errors: str = "strict") -> str:
        return b"".join(self._chunks).decode()

    async def read(self, n: int = -1) -> bytes:
        data, self._chunks = b"".join(self._chunks), []
        if n >= 0:
            data, rest = data[:n], data[n:]
            self._chunks = [rest] if rest else []
        return data

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


class FakeSession:
    """Stands where aiohttp's session would: returns a scripted response or raises."""

    def __init__(self, response: FakeResponse | None = None, error: Exception | None = None):
        self.response, self.error, self.posted = response, error, []

    def post(self, url: str, data: bytes, headers: dict):
        self.posted.append((url, data))
        if self.error is not None:
            raise self.error
        return self.response


def test_send_records_a_stream_against_the_scripted_clock():
    session = FakeSession(FakeResponse(200, [token(), token(), USAGE + DONE]))
    out = asyncio.run(send(session, "http://x/v1/completions", b"{}", SSEParser(),
                           RequestOutput(), ScriptedClock([1.0, 1.5, 2.0, 2.5])))
    assert out.success and out.start_time == 1.0 and out.ttft == 0.5 and out.itl == [0.5]
    assert session.posted == [("http://x/v1/completions", b"{}")]


def test_send_turns_an_http_error_into_data():
    session = FakeSession(FakeResponse(503, [b"overloaded"], reason="Service Unavailable"))
    out = asyncio.run(send(session, "u", b"{}", SSEParser(), RequestOutput(),
                           ScriptedClock([0.0])))
    assert not out.success and out.reason == "http_503" and "overloaded" in out.error


def test_send_turns_an_exception_into_data():
    session = FakeSession(error=ConnectionRefusedError("refused"))
    out = asyncio.run(send(session, "u", b"{}", SSEParser(), RequestOutput(),
                           ScriptedClock([0.0])))
    assert not out.success and out.reason == "ConnectionRefusedError" and "refused" in out.error

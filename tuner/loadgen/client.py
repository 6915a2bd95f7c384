"""The one streaming loop, shared by every endpoint, and the record of one request.

Timing follows vLLM's ``endpoint_request_func.py``: TTFT runs from the send to the first
message that carries a token (non-empty ``choices``); every later token message adds one
inter-token latency (ITL); the latency (E2EL) ends at the last token message, so a trailing
usage report or ``[DONE]`` does not lengthen it. Each message is stamped when the read that
completes it arrived (the kernel's receive stamp on the fast client): messages completed by
one read share its stamp, so their ITL is 0 (vLLM's client does the same). Such reads are
counted (``coalesced_reads``). Hence, for every successful request,
``latency - ttft == sum(itl)`` up to float rounding.

Per token (``itl_per_token``): a message may carry k > 1 tokens (vLLM's ``stream_interval``,
a server that batches its writes), and a read may complete several messages. Each *arrival*
(a read that completed token messages) after the first spreads its gap over the tokens it
brought: k values of gap / k. The tokens of the first arrival are part of the TTFT. So
``latency - ttft == sum(itl_per_token)`` too, and a coalesced read adds no zero. Tokens per
message: when the server reports usage on every message (``continuous_usage_stats``), the
deltas of its ``completion_tokens``; otherwise the first message carries one token (vLLM
always sends the first token alone) and the rest of the reported ``completion_tokens`` are
spread evenly over the later messages (exact when every message carries one token, or when
each carries ``stream_interval`` tokens but the last).

A failed request is data: ``success=False`` with ``reason`` (a short category such as
``http_500``, ``ClientPayloadError``, ``TimeoutError``, ``oversized_message``, ``stream_error``,
``no_content``) and ``error`` (the detail). Nothing but cancellation escapes ``send``. What the
client reads of a reply is bounded: a stream message by ``streams.MAX_MESSAGE_BYTES``, an
error reply's body by ``MAX_ERROR_BODY`` (the rest is not read), a whole reply by the
request's timeout.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field

import aiohttp

Clock = Callable[[], float]
MAX_ERROR_BODY = 2048  # bytes of a non-200 reply's body kept for its error message
# A whole page read at once (/v1/models, /metrics): far above any server's, yet small.
MAX_PAGE_BYTES = 16 << 20


def request_headers() -> dict[str, str]:
    """JSON content type, and a bearer token when OPENAI_API_KEY is set (as vLLM's client)."""
    headers = {"Content-Type": "application/json"}
    if key := os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = f"Bearer {key}"
    return headers


@dataclass(slots=True)
class RequestOutput:
    """What one request measured; times in seconds, ``start_time`` on the run's clock."""

    index: int = -1
    success: bool = False
    reason: str = ""
    error: str = ""
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    output_tokens: int = 0
    prompt_len: int = 0
    chunks: int = 0
    start_time: float = 0.0
    scheduled_time: float = 0.0
    itl_per_token: list[float] = field(default_factory=list)
    arrivals: int = 0  # reads that completed at least one token message
    coalesced_reads: int = 0  # reads that completed more than one
    multi_token_messages: int = 0

    def fail(self, e: BaseException) -> "RequestOutput":
        """Record ``e`` as this request's failure: a failed request is data."""
        self.success = False
        self.reason = getattr(e, "failure_reason", type(e).__name__)
        self.error = f"{type(e).__name__}: {e}"
        return self


class StreamTimer:
    """The one streaming loop's body, shared by every endpoint and both HTTP clients: feed it
    each network read of the response body with the time it arrived.

    ``parser`` has ``feed(bytes) -> int`` and ``flush() -> int`` (token messages completed),
    plus ``completion_tokens``, ``prompt_tokens`` and ``error`` (see ``streams``).
    """

    __slots__ = ("out", "parser", "last", "chunks", "gaps", "messages", "usage")

    def __init__(self, out: RequestOutput, parser) -> None:
        self.out, self.parser = out, parser
        self.last = out.start_time
        self.chunks = 0
        self.gaps: list[float] = []  # per arrival after the first: its gap
        self.messages: list[int] = []  # per arrival: token messages it completed
        self.usage: list[int | None] = []  # per arrival: completion_tokens reported so far

    def feed(self, t: float, data: bytes) -> None:
        n = self.parser.feed(data)
        if n:
            self._mark(t, n)

    def _mark(self, t: float, n: int) -> None:
        out = self.out
        if self.chunks:
            gap = t - self.last
            out.itl.append(gap)
            self.gaps.append(gap)
        else:
            out.ttft = t - out.start_time
        if n > 1:  # the other messages of this read arrived together with the first
            out.itl.extend([0.0] * (n - 1))
        self.chunks += n
        self.messages.append(n)
        self.usage.append(self.parser.completion_tokens)
        self.last = t

    def finish(self, clock: Clock) -> RequestOutput:
        n = self.parser.flush()
        if n:
            self._mark(clock(), n)
        _finish(self.out, self.parser, self.chunks, self.last - self.out.start_time)
        if self.out.success:
            _per_token(self.out, self.gaps, self.messages, self.usage)
        return self.out


def _finish(out: RequestOutput, parser, chunks: int, latency: float) -> None:
    out.chunks = chunks
    out.latency = latency if chunks else 0.0
    if parser.prompt_tokens is not None:
        out.prompt_len = parser.prompt_tokens
    # Without a usage report (the /generate endpoint) each token message counts as a token.
    out.output_tokens = parser.completion_tokens if parser.completion_tokens is not None else chunks
    if parser.error is not None:
        out.reason, out.error = "stream_error", parser.error
    elif chunks == 0:
        out.reason, out.error = "no_content", "the stream carried no token message"
    else:
        out.success = True


def _per_token(out: RequestOutput, gaps: list[float], messages: list[int],
               usage: list[int | None]) -> None:
    """Fill ``itl_per_token`` and the counts (see the module's docstring)."""
    tokens = arrival_tokens(messages, usage, out.output_tokens)
    per_message = message_tokens(messages, usage, out.output_tokens)
    out.arrivals = len(messages)
    out.coalesced_reads = sum(1 for m in messages if m > 1)
    out.multi_token_messages = sum(1 for k in per_message if k > 1)
    out.itl_per_token = [gap / k for gap, k in zip(gaps, tokens[1:]) if k for _ in range(k)]


def arrival_tokens(messages: list[int], usage: list[int | None], total: int) -> list[int]:
    """Tokens each arrival brought, from the usage reported with it when every arrival has
    one, else one token for the first message and the rest spread evenly (rounded so that
    they sum to ``total``) over the later messages."""
    if usage and all(u is not None for u in usage) and usage[-1] == total:
        counts = [usage[0]] + [b - a for a, b in zip(usage, usage[1:])]
        if all(c >= 0 for c in counts):
            return counts
    later = sum(messages) - 1
    if later <= 0:
        return [total]
    per, done, seen, out = (total - 1) / later, 0, 0, []
    for i, m in enumerate(messages):
        seen += m - (1 if i == 0 else 0)
        upto = (1 if total else 0) + round(seen * per)
        out.append(upto - done)
        done = upto
    return out


def message_tokens(messages: list[int], usage: list[int | None], total: int) -> list[int]:
    """Tokens per message: an arrival's tokens spread over its messages (see above)."""
    out = []
    for m, k in zip(messages, arrival_tokens(messages, usage, total)):
        out += [k // m + (1 if j < k % m else 0) for j in range(m)]
    return out


async def consume(stream: AsyncIterable[bytes], parser, clock: Clock, out: RequestOutput) -> None:
    """Read ``stream`` to its end, timing every token message into ``out``."""
    timer = StreamTimer(out, parser)
    async for data in stream:
        timer.feed(clock(), data)
    timer.finish(clock)


async def send(session: aiohttp.ClientSession, url: str, body: bytes, parser,
               out: RequestOutput, clock: Clock = time.perf_counter) -> RequestOutput:
    """POST ``body`` to ``url`` and stream the reply into ``out``; never raises but cancels."""
    out.start_time = clock()
    try:
        async with session.post(url, data=body, headers=request_headers()) as resp:
            if resp.status != 200:
                detail = (await read_capped(resp, MAX_ERROR_BODY))[0][:300]
                out.reason = f"http_{resp.status}"
                out.error = (f"HTTP {resp.status} {resp.reason}: "
                             f"{detail.decode(errors='replace')}")
                return out
            await consume(resp.content.iter_any(), parser, clock, out)
    except asyncio.CancelledError:
        raise
    except TimeoutError:  # aiohttp's says nothing
        out.fail(TimeoutError(f"no complete reply within {session.timeout.total:g} s"))
    except Exception as e:  # any failure of one request is data, not the run's end
        out.fail(e)
    return out


async def read_capped(resp: aiohttp.ClientResponse, cap: int) -> tuple[bytes, bool]:
    """Up to ``cap`` bytes of ``resp``'s body, and whether that was all of it (the rest is
    left unread: the connection is closed, not drained)."""
    data = bytearray()
    while len(data) <= cap:
        chunk = await resp.content.read(cap + 1 - len(data))
        if not chunk:
            return bytes(data), True
        data += chunk
    return bytes(data[:cap]), False

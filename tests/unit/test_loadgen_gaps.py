"""ITL per message and per token, the gap counts, and the judgement that a run cannot tell an
ITL: scripted clock and scripted streams, no socket."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.loadgen import gaps
from tuner.loadgen.client import RequestOutput, consume
from tuner.loadgen.metrics import calculate_metrics
from tuner.loadgen.streams import SSEParser

pytestmark = pytest.mark.unit


def message(tokens: int = 1, usage: int | None = None) -> bytes:
    body = {"id": "x", "choices": [{"index": 0, "text": " tok" * tokens}],
            "usage": None if usage is None else {"prompt_tokens": 5, "completion_tokens": usage}}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def usage(n: int) -> bytes:
    return (b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d}}'
            b"\n\ndata: [DONE]\n\n" % n)


def run(reads: list[bytes], times: list[float]) -> RequestOutput:
    """Each read arrives at its scripted time; the stream ends at the last time."""
    out = RequestOutput(start_time=0.0)
    clock = iter(times)
    asyncio.run(consume(_aiter(reads), SSEParser(), lambda: next(clock), out))
    return out


async def _aiter(items):
    for item in items:
        yield item


def test_all_tokens_in_one_message_leave_no_gap_and_no_itl_to_tell():
    out = run([message(8), usage(8)], [0.5, 0.75, 0.75])
    assert out.success and out.output_tokens == 8 and out.chunks == 1
    assert out.itl == [] and out.itl_per_token == [] and out.multi_token_messages == 1
    counts = gaps.gap_counts([out])
    assert (counts["expected_gaps"], counts["observed_gaps"]) == (7, 0)
    reasons = gaps.unobservable(counts, 0.9)
    assert set(reasons) == {gaps.ITL, gaps.PER_TOKEN}
    assert "1 replies came in one message" in reasons[gaps.ITL]
    m = calculate_metrics([out], 1.0)
    assert m["p99_itl_ms"] == 0.0 and m["p99_tpot_ms"] == 0.0  # what must never be told
    assert gaps.first_unobservable(["output_throughput", "p99_itl_ms"], reasons).startswith(
        "p99_itl_ms: ITL not observable")
    assert gaps.first_unobservable(["p99_tpot_ms"], reasons).startswith("p99_tpot_ms: per-token")
    assert gaps.first_unobservable(["output_throughput", "p99_ttft_ms"], reasons) is None


def test_k_tokens_per_message_spread_their_gap_over_their_tokens():
    # stream_interval 4: the first token alone, then 4 and 4 (9 tokens in 3 messages).
    out = run([message(1), message(4), message(4), usage(9)], [0.25, 0.75, 1.25, 1.5])
    assert out.itl == [0.5, 0.5]  # vLLM's ITL: one per message
    assert out.itl_per_token == [0.125] * 8
    assert out.latency - out.ttft == sum(out.itl_per_token)
    assert out.multi_token_messages == 2 and out.coalesced_reads == 0
    counts = gaps.gap_counts([out])
    assert counts["itl_gap_share"] == 2 / 8 and counts["token_gap_share"] == 1.0
    reasons = gaps.unobservable(counts, 0.9)
    assert set(reasons) == {gaps.ITL}
    assert "2 of 3 messages carried several tokens" in reasons[gaps.ITL]
    m = calculate_metrics([out], 2.0)
    assert m["p99_itl_per_token_ms"] == 125.0 and m["mean_tpot_ms"] == 125.0
    assert (m["messages"], m["tokens"], m["multi_token_messages"], m["zero_gaps"]) == (3, 9, 2, 0)


def test_a_read_that_completes_several_messages_is_counted_and_adds_no_per_token_zero():
    out = run([message(), message() + message(), message(), usage(4)], [0.25, 0.75, 1.0, 1.0])
    assert out.itl == [0.5, 0.0, 0.25]  # as vLLM's client: the second of the read gets 0
    assert out.itl_per_token == [0.25, 0.25, 0.25]
    assert out.coalesced_reads == 1 and out.arrivals == 3
    counts = gaps.gap_counts([out])
    assert counts["zero_gaps"] == 1 and counts["observed_gaps"] == 2
    assert counts["itl_gap_share"] == 2 / 3 and counts["token_gap_share"] == 2 / 3
    reasons = gaps.unobservable(counts, 0.9)
    assert "1 reads found several messages at once (1 zero gaps" in reasons[gaps.ITL]
    assert "event loop" not in reasons[gaps.ITL]
    assert gaps.unobservable(counts, 0.5) == {}
    # A client whose own loop was late says so: it, not the server, lost the gaps.
    late = gaps.unobservable(counts, 0.9, loop_lag_max_ms=137.4)
    assert "the client's event loop ran up to 137 ms late" in late[gaps.PER_TOKEN]


def test_usage_on_every_message_gives_each_message_its_tokens():
    # continuous_usage_stats: completion_tokens 1, 3, 4 -> messages of 1, 2 and 1 tokens.
    out = run([message(1, 1), message(2, 3), message(1, 4), usage(4)], [0.25, 0.5, 1.0, 1.0])
    assert out.itl_per_token == [0.125, 0.125, 0.5]
    assert out.multi_token_messages == 1


def test_one_token_per_message_gives_the_same_itl_both_ways():
    out = run([message(), message(), message(), usage(3)], [0.25, 0.5, 0.625, 0.75])
    assert out.itl == out.itl_per_token == [0.25, 0.125]
    assert gaps.unobservable(gaps.gap_counts([out]), 1.0) == {}


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=12),
       cuts=st.lists(st.booleans(), min_size=12, max_size=12))
def test_per_token_gaps_sum_to_the_decode_time_and_count_the_later_tokens(sizes, cuts):
    """However the server groups tokens into messages and the reads group messages."""
    msgs = [message(k) for k in sizes]
    reads, current = [], b""
    for msg, cut in zip(msgs, cuts):
        current += msg
        if cut:
            reads.append(current)
            current = b""
    reads.append(current + usage(sum(sizes)))
    times = [0.25 * (i + 1) for i in range(len(reads) + 1)]
    out = run(reads, times)
    assert out.latency - out.ttft == pytest.approx(sum(out.itl_per_token))
    assert len(out.itl_per_token) <= sum(sizes) - 1
    assert all(x > 0 for x in out.itl_per_token)

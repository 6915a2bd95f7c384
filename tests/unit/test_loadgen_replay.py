"""Trace replay: arrivals scaled by the speed-up, prompts of the trace's lengths, shared hash
ids giving shared leading tokens, and the trace as a workload kind of the study schema."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tuner.errors import UsageError
from tuner.loadgen.benchmark import schedule
from tuner.loadgen.replay import (PREFIX_BLOCK_TOKENS, arrivals_at, arrivals_within_at,
                                  offered_rate, prompt_ids, speedup_for)
from tuner.loadgen.spec import LoadSpec, Workload, WorkloadSpec
from tuner.loadgen.trace import TraceRecord, read_trace
from tuner.loadgen.workloads import take
from tuner.testing.traces import TraceShape, synthetic_trace

pytestmark = pytest.mark.unit
SYNTHETIC = Path(__file__).resolve().parents[2] / "examples" / "traces" / "synthetic-mooncake.jsonl"
TRACE = (TraceRecord(0.0, 10, 2), TraceRecord(1.0, 20, 3), TraceRecord(4.0, 30, 4))


def test_a_speedup_divides_every_arrival_and_multiplies_the_rate():
    assert arrivals_at(TRACE, 1.0, 3) == [0.0, 1.0, 4.0]
    assert arrivals_at(TRACE, 4.0, 3) == [0.0, 0.25, 1.0]
    assert offered_rate(TRACE, 4.0) == pytest.approx(4 * offered_rate(TRACE, 1.0))


def test_a_run_longer_than_the_trace_replays_it_again_one_mean_gap_later():
    # span 4 s over 2 gaps: the second pass starts 2 s after the first pass's last arrival
    assert arrivals_at(TRACE, 2.0, 7) == [0.0, 0.5, 2.0, 3.0, 3.5, 5.0, 6.0]
    assert offered_rate(TRACE, 1.0) == pytest.approx(3 / 6)
    assert arrivals_within_at(TRACE, 2.0, 5.0) == [0.0, 0.5, 2.0, 3.0, 3.5]


def test_the_speedup_for_a_rate_is_that_rate_over_the_traces_own():
    # TRACE offers 3 requests in a 6-s period (0.5 requests/s) as recorded
    assert speedup_for(TRACE, 2.0) == pytest.approx(4.0)
    assert speedup_for(TRACE, 0.25) == pytest.approx(0.5)
    assert offered_rate(TRACE, speedup_for(TRACE, 7.0)) == pytest.approx(7.0)


def test_shared_hash_ids_give_shared_leading_tokens_and_lengths_match():
    draws = iter(range(1, 10**6))
    blocks: dict[int, tuple[int, ...]] = {}

    def draw(n: int) -> tuple[int, ...]:
        return tuple(next(draws) for _ in range(n))

    a = prompt_ids(TraceRecord(0, 2 * PREFIX_BLOCK_TOKENS + 7, 1, (5, 6, 7)), blocks, draw)
    b = prompt_ids(TraceRecord(0, PREFIX_BLOCK_TOKENS + 3, 1, (5, 8)), blocks, draw)
    c = prompt_ids(TraceRecord(0, 40, 1, ()), blocks, draw)
    assert (len(a), len(b), len(c)) == (2 * PREFIX_BLOCK_TOKENS + 7, PREFIX_BLOCK_TOKENS + 3, 40)
    shared = PREFIX_BLOCK_TOKENS
    assert a[:shared] == b[:shared] and a[shared] != b[shared]
    assert not set(c) & (set(a) | set(b))


def test_the_trace_workload_replays_the_file_in_order_and_repeats_it():
    w = Workload(kind="trace", trace=str(SYNTHETIC), num_requests=10)
    records = read_trace(SYNTHETIC)
    requests = take(w.requests(vocab_size=1000), len(records) + 5)
    assert [(r.prompt_len, r.output_len) for r in requests] == [
        (x.input_tokens, x.output_tokens) for x in (*records, *records[:5])]
    ids = [r.segments[0][1] for r in requests]
    assert all(len(i) == r.prompt_len for i, r in zip(ids, requests))
    # requests whose hash ids start alike start with the same block of tokens
    firsts = {x.hash_ids[0] for x in records}
    for h in firsts:
        same = {i[:PREFIX_BLOCK_TOKENS] for i, x in zip(ids, records)
                if x.hash_ids[0] == h and x.input_tokens >= PREFIX_BLOCK_TOKENS}
        assert len(same) <= 1
    assert ids[len(records)][:PREFIX_BLOCK_TOKENS] == ids[0][:PREFIX_BLOCK_TOKENS]
    assert take(w.requests(vocab_size=1000), 3) == requests[:3]


def test_a_trace_schedule_comes_from_the_load_speedup():
    w = Workload(kind="trace", trace=str(SYNTHETIC), num_requests=50, speedup=5.0)
    recorded = [r.arrival_s for r in read_trace(SYNTHETIC)[:50]]
    assert schedule(w.requests(), w.arrivals()) == pytest.approx([t / 5 for t in recorded])
    assert not w.arrivals().closed_loop
    timed = w.arrivals(duration_s=2.0)
    assert max(schedule(w.requests(), timed)) < 2.0


def test_the_study_schema_takes_the_trace_kind_and_refuses_half_of_it():
    w = Workload(kind="trace", trace="t.jsonl")
    assert w.speedup == 1.0 and w.arrivals().speedup == 1.0
    assert Workload.model_validate({"kind": "trace", "trace": "t", "speedup": 3}).speedup == 3
    for bad, words in (({"kind": "trace"}, "needs 'trace'"),
                       ({"kind": "random", "speedup": 2.0}, "needs kind 'trace'"),
                       ({"kind": "trace", "trace": "t", "speedup": 0}, "greater than 0"),
                       ({"kind": "trace", "trace": "t", "request_rate": 5.0},
                        "give speedup, not request_rate")):
        with pytest.raises(ValueError, match=words):
            Workload.model_validate(bad)


def test_a_load_generator_run_refuses_a_trace_without_a_speedup():
    spec = WorkloadSpec(kind="trace", trace=str(SYNTHETIC))
    with pytest.raises(UsageError, match="needs a speedup"):
        schedule(spec, LoadSpec(num_requests=5))
    with pytest.raises(UsageError, match="needs a speedup"):
        schedule(WorkloadSpec(), LoadSpec(num_requests=5, speedup=2.0, max_concurrency=None))


def test_the_committed_synthetic_trace_is_what_the_generator_writes():
    lines = SYNTHETIC.read_text().splitlines()
    assert [json.loads(x) for x in lines] == synthetic_trace(TraceShape())
    assert synthetic_trace(TraceShape(seed=1)) != synthetic_trace(TraceShape())
    records = read_trace(SYNTHETIC)
    assert len(records) == TraceShape().requests
    assert all(len(r.hash_ids) == math.ceil(r.input_tokens / PREFIX_BLOCK_TOKENS) for r in records)

"""Workloads, arrival schedules, request bodies and specs: seeded, exact, validated."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tuner.errors import UsageError
from tuner.loadgen.arrivals import arrival_times, arrivals_within, share_of, shard
from tuner.loadgen.endpoints import build_body, ids_to_text
from tuner.loadgen.spec import SLO, LoadSpec, WorkloadSpec
from tuner.loadgen.workloads import length_bounds, take

pytestmark = pytest.mark.unit


def test_random_workload_is_reproducible_and_within_vllm_bounds():
    spec = WorkloadSpec(kind="random", input_len=100, output_len=20, range_ratio=0.25,
                        vocab_size=1000, seed=3)
    a, b = take(spec, 200), take(spec, 200)
    assert a == b and take(spec, 50) == a[:50]
    assert length_bounds(100, 0.25) == (75, 125) and length_bounds(20, 0.25) == (15, 25)
    for r in a:
        (_, ids), = r.segments
        assert r.prompt_len == len(ids) and 75 <= len(ids) <= 125 and 15 <= r.output_len <= 25
        assert all(100 <= i < 1000 for i in ids)
    assert take(WorkloadSpec(seed=4, vocab_size=1000), 3) != take(WorkloadSpec(vocab_size=1000), 3)


def test_exact_lengths_when_range_ratio_is_zero():
    for r in take(WorkloadSpec(input_len=64, output_len=8), 20):
        assert (r.prompt_len, r.output_len) == (64, 8)


def test_shared_prefix_requests_share_one_of_k_prefixes_and_differ_after_it():
    spec = WorkloadSpec(kind="shared-prefix", num_prefixes=3, prefix_len=32, input_len=16)
    reqs = take(spec, 60)
    prefixes = {r.segments[0][1][:32] for r in reqs}
    suffixes = {r.segments[0][1][32:] for r in reqs}
    assert len(prefixes) == 3 and len(suffixes) == 60
    assert all(r.prompt_len == 48 for r in reqs)


def test_multi_turn_requests_carry_the_history():
    spec = WorkloadSpec(kind="multi-turn", turns=3, conversations=4, input_len=8, output_len=4)
    reqs = take(spec, 12)
    assert [len(r.segments) for r in reqs] == [1] * 4 + [3] * 4 + [5] * 4
    for c in range(4):
        t1, t2, t3 = reqs[c], reqs[4 + c], reqs[8 + c]
        assert t2.segments[0] == t1.segments[0] and t3.segments[:3] == t2.segments
        assert [role for role, _ in t3.segments] == ["user", "assistant"] * 2 + ["user"]
        assert len(t2.segments[1][1]) == t1.output_len
        assert t3.prompt_len == sum(len(ids) for _, ids in t3.segments)


def test_sharegpt_takes_first_pairs_and_filters_like_vllm(tmp_path):
    data = [
        {"conversations": [{"from": "human", "value": "q" * 40},
                           {"from": "gpt", "value": "a" * 80}]},
        {"conversations": [{"from": "human", "value": "too short"}]},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "x"}]},
    ]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    reqs = take(WorkloadSpec(kind="sharegpt", dataset=str(path), output_len=0), 4)
    assert all(r.segments == (("user", "q" * 40),) and r.output_len == 20 for r in reqs)
    fixed = take(WorkloadSpec(kind="sharegpt", dataset=str(path), output_len=7), 1)
    assert fixed[0].output_len == 7
    path.write_text("{}")
    with pytest.raises(UsageError, match="JSON list"):
        take(WorkloadSpec(kind="sharegpt", dataset=str(path)), 1)


def test_arrivals_follow_vllm_rescaling_and_modes():
    times = arrival_times(1000, rate=50.0, burstiness=1.0, seed=1)
    assert times == arrival_times(1000, 50.0, 1.0, 1)
    assert times[-1] == pytest.approx(20.0) and all(np.diff(times) >= 0)
    assert arrival_times(5, math.inf) == [0.0] * 5
    even = arrival_times(4, rate=2.0, burstiness=math.inf)
    assert even == pytest.approx([0.5, 1.0, 1.5, 2.0])
    gaps_bursty = np.diff(arrival_times(5000, 10.0, 0.2, seed=2))
    gaps_poisson = np.diff(arrival_times(5000, 10.0, 1.0, seed=2))
    assert gaps_bursty.std() > 1.5 * gaps_poisson.std()
    within = arrivals_within(10.0, rate=100.0, seed=5)
    assert max(within) < 10.0 and 800 < len(within) < 1200


def test_shares_split_requests_and_concurrency_over_processes():
    assert shard(list(range(7)), 1, 3) == [1, 4]
    assert [share_of(10, k, 3) for k in range(3)] == [4, 3, 3]
    assert share_of(None, 0, 2) is None


def test_bodies_send_ids_to_completions_and_generate_and_words_to_chat():
    spec = WorkloadSpec(kind="multi-turn", turns=2, conversations=1, input_len=3, output_len=2)
    first, second = take(spec, 2)
    body = json.loads(build_body(second, "completions", "m"))
    assert body["prompt"] == [i for _, ids in second.segments for i in ids]
    assert body["max_tokens"] == 2 and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True} and body["stream"] is True
    chat = json.loads(build_body(second, "chat", "m"))
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "user"]
    assert chat["messages"][0]["content"] == ids_to_text(first.segments[0][1])
    assert chat["max_completion_tokens"] == 2
    text = json.loads(build_body(first, "completions", "m", text_prompts=True))
    assert text["prompt"] == ids_to_text(first.segments[0][1])
    gen = json.loads(build_body(first, "generate", "m", ignore_eos=False))
    assert gen["prompt"] == ids_to_text(first.segments[0][1])
    assert "ignore_eos" not in gen and "model" not in gen


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "nope"}, "unknown"),
    ({"range_ratio": 1.0}, "range_ratio"),
    ({"vocab_size": 50}, "vocab_size"),
    ({"kind": "shared-prefix"}, "num_prefixes"),
    ({"kind": "sharegpt"}, "dataset"),
])
def test_workload_spec_rejects_bad_input_with_a_fix(kwargs, message):
    with pytest.raises(UsageError, match=message):
        WorkloadSpec(**kwargs)


def test_load_spec_and_slo_validation():
    with pytest.raises(UsageError, match="endpoint"):
        LoadSpec(endpoint="grpc")
    with pytest.raises(UsageError, match="burstiness"):
        LoadSpec(burstiness=0)
    with pytest.raises(UsageError, match="max_concurrency"):
        LoadSpec(max_concurrency=None, duration_s=5)
    with pytest.raises(UsageError, match="non-negative"):
        SLO(ttft_p99_ms=-1)
    assert SLO().empty and not SLO(e2el_ms=1).empty

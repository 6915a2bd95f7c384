"""The simulated scheduler and KV cache: vLLM's rules, checked on small hand-made cases."""

from __future__ import annotations

import pytest

from tuner.sim.config import EngineConfig
from tuner.sim.kvcache import BlockPool, block_hashes
from tuner.sim.scheduler import Request, Scheduler

pytestmark = pytest.mark.unit


def cfg(**kw) -> EngineConfig:
    base = dict(max_num_batched_tokens=64, max_model_len=256, max_num_seqs=8, block_size=4,
                enable_prefix_caching=False)
    return EngineConfig(**{**base, **kw})


def run(s: Scheduler, limit: int = 10_000) -> list:
    steps = []
    while s.has_work() and len(steps) < limit:
        step = s.schedule()
        assert step.work, "stalled"
        steps.append(step)
        s.complete(step)
    return steps


def test_block_hashes_chain_over_the_whole_prefix():
    a = block_hashes([1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    b = block_hashes([1, 2, 3, 4, 5, 6, 7, 0], 4)
    c = block_hashes([0, 2, 3, 4, 5, 6, 7, 8], 4)
    assert len(a) == 2 and a[0] == b[0] and a[1] != b[1]
    assert c[1] != a[1]  # same tokens in block 2, different history


def test_every_request_finishes_with_its_tokens_and_frees_its_blocks():
    s = Scheduler(cfg(), num_blocks=200)
    reqs = [Request(i, 20 + i, 5 + i % 3) for i in range(12)]
    for r in reqs:
        s.add(r)
    steps = run(s)
    assert all(r.finished and r.output == r.max_tokens for r in reqs)
    assert s.pool.num_free() == 200
    assert all(st.num_tokens <= 64 for st in steps)
    assert all(len(st.work) <= 8 for st in steps)


def test_chunked_prefill_splits_a_long_prompt_and_mixes_decodes():
    s = Scheduler(cfg(max_num_batched_tokens=16), num_blocks=200)
    s.add(Request(0, 8, 10))
    s.complete(s.schedule())  # prompt of 8 done, first token
    s.add(Request(1, 40, 2))
    step = s.schedule()
    assert [(r.rid, n) for r, n, _ in step.work] == [(0, 1), (1, 15)]


def test_prefill_first_without_chunking():
    s = Scheduler(cfg(enable_chunked_prefill=False, max_num_batched_tokens=256), num_blocks=200)
    s.add(Request(0, 8, 10))
    s.complete(s.schedule())
    s.add(Request(1, 40, 2))
    step = s.schedule()  # the new prompt goes alone: the decode waits
    assert [(r.rid, n) for r, n, _ in step.work] == [(1, 40)]
    s.complete(step)
    step = s.schedule()  # no prompt waiting: a decode step of both
    assert sorted((r.rid, n) for r, n, _ in step.work) == [(0, 1), (1, 1)]


def test_preemption_by_recompute_when_blocks_run_out():
    s = Scheduler(cfg(max_num_batched_tokens=128), num_blocks=12)  # 48 tokens of KV
    reqs = [Request(i, 12, 20) for i in range(3)]
    for r in reqs:
        s.add(r)
    run(s)
    assert s.preemptions > 0
    assert all(r.finished and r.output == 20 for r in reqs)
    assert s.pool.num_free() == 12


def test_prefix_cache_hits_shared_blocks_and_keeps_one_token_to_compute():
    pool = BlockPool(100, 4, caching=True)
    tokens = list(range(16))
    first = Request(0, 16, 1, block_hashes(tokens, 4))
    assert pool.match(first.hashes, 16) == []
    pool.take_hits(first, [])
    pool.allocate(first, 4)
    pool.commit(first, 16)
    pool.free(first)
    again = Request(1, 16, 1, block_hashes(tokens, 4))
    hits = pool.match(again.hashes, 16)
    assert len(hits) == 3  # the last block is recomputed so that a token is sampled
    pool.take_hits(again, hits)
    assert pool.hits == 12 and pool.queries == 32
    assert pool.num_free() == 100 - 3


def test_prefix_caching_computes_fewer_prompt_tokens():
    def prompt_work(caching: bool) -> int:
        s = Scheduler(cfg(enable_prefix_caching=caching), num_blocks=400)
        shared = list(range(100, 140))
        for i in range(6):
            toks = shared + [1000 + i] * 8
            s.add(Request(i, len(toks), 3, block_hashes(toks, 4)))
        return sum(st.num_tokens - st.num_decodes for st in run(s))

    assert prompt_work(True) < prompt_work(False)


def test_cached_blocks_are_evicted_least_recently_freed_first():
    pool = BlockPool(4, 4, caching=True)
    a = Request(0, 8, 1, [11, 12])
    pool.allocate(a, 2)
    pool.commit(a, 8)
    pool.free(a)  # tail (12) becomes evictable before head (11)
    b = Request(1, 4, 1, [])
    pool.allocate(b, 3)  # two plain blocks, then evicts 12
    assert 12 not in pool.refs and 11 in pool.refs

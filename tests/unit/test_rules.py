"""The article's rules and vLLM's start checks, as pure functions; repair semantics."""

import pytest

from tuner.space import Context, rule_set
from tuner.space.repair import repair
from tuner.storage import load_study_file
from tuner.space import build_space

CTX = Context(min_model_len=1152, model_max_len=8192, num_attention_heads=32)
VALID = {"max_num_batched_tokens": 8192, "max_model_len": 4096, "gpu_memory_utilization": 0.9,
         "enable_prefix_caching": True, "enable_chunked_prefill": False, "enforce_eager": False,
         "max_num_seqs": 256, "block_size": 16, "kv_cache_dtype": "auto",
         "tensor_parallel_size": 1}


def ids(flags, name="article"):
    return [r.id for r in rule_set(name).violations(flags, CTX)]


def test_valid_configuration_breaks_nothing():
    assert ids(VALID) == [] and ids(VALID, "vllm-v1") == []


def test_budget_below_model_len_without_chunked_prefill():
    assert ids({**VALID, "max_num_batched_tokens": 2048}) == ["budget-covers-model-len"]


def test_budget_below_model_len_allowed_with_chunked_prefill():
    flags = {**VALID, "max_num_batched_tokens": 256, "enable_chunked_prefill": True,
             "enable_prefix_caching": False}
    assert ids(flags) == []


def test_prefix_caching_with_chunked_prefill_article_only():
    flags = {**VALID, "enable_chunked_prefill": True}
    assert ids(flags) == ["no-prefix-caching-with-chunked-prefill"]
    assert ids(flags, "vllm-v1") == []


def test_model_len_must_cover_workload_and_stay_in_context():
    assert ids({**VALID, "max_model_len": 1024}) == ["model-len-covers-workload"]
    assert "model-len-within-context" in ids({**VALID, "max_model_len": 9000,
                                               "max_num_batched_tokens": 9000})


def test_budget_must_cover_max_num_seqs():
    flags = {**VALID, "enable_chunked_prefill": True, "enable_prefix_caching": False,
             "max_num_batched_tokens": 128, "max_num_seqs": 256}
    assert ids(flags) == ["budget-covers-seqs"]


def test_tensor_parallel_must_divide_heads():
    assert ids({**VALID, "tensor_parallel_size": 3}) == ["tp-divides-heads"]


@pytest.fixture
def demo_space(study_file):
    path = study_file('[model]\npath = "models/llama3-8b"\n[engine]\nkind = "sim"\n')
    return build_space(load_study_file(path))


def test_repair_moves_budget_up_to_model_len(demo_space):
    raw = {**VALID, "max_num_batched_tokens": 2048}
    fixed = repair(demo_space, raw)
    assert fixed.infeasible is None
    assert fixed.flags["max_num_batched_tokens"] == 4096
    assert fixed.fixed_rules == ("budget-covers-model-len",)


def test_repair_leaves_valid_unchanged_and_is_idempotent(demo_space):
    assert repair(demo_space, VALID).flags == VALID
    assert not repair(demo_space, VALID).changed
    once = repair(demo_space, {**VALID, "enable_chunked_prefill": True}).flags
    assert once["enable_prefix_caching"] is False
    assert repair(demo_space, once).flags == once


def test_repair_outside_space_is_infeasible(study_file):
    path = study_file('[model]\npath = "models/llama3-8b"\n[space.ranges.max_num_batched_tokens]\n'
                      'low = 128\nhigh = 2048\n[space]\nfixed = { enable_chunked_prefill = false }\n')
    space = build_space(load_study_file(path))
    fixed = repair(space, {**VALID, "max_num_batched_tokens": 2048, "max_model_len": 4096})
    assert fixed.infeasible and "max_num_batched_tokens" in fixed.infeasible

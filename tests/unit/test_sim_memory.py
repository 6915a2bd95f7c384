"""The simulator's memory model and start checks against vLLM's numbers and wording."""

from __future__ import annotations

import pytest

from tuner.sim.config import resolve
from tuner.sim.memory import plan_memory
from tuner.sim.profiles import engine_constants, gpu_names, load_gpu, sources
from tuner.sim.shape import LLAMA3_8B, ModelShape, shape_from_config
from tuner.sim.startup import StartFailure, check_start

pytestmark = pytest.mark.unit
H200 = load_gpu("h200")
K = engine_constants()
MEASURED_KV_TOKENS = 920_192  # vLLM 0.24.0, H200, Llama-3-8B shape, defaults (VLLM.md)


def start(flags, shape=LLAMA3_8B, gpu=H200):
    return check_start(resolve(flags, shape, gpu), shape, gpu, K)


def test_every_constant_has_a_source():
    for section, table in sources().items():
        for name, source in table.items():
            assert source.strip(), f"{section}.{name} has no source"
    assert {"h200", "h100", "a100-80g", "l4"} <= set(gpu_names())


def test_llama3_8b_weights_and_kv_per_token():
    assert LLAMA3_8B.num_params() == pytest.approx(8.03e9, rel=0.001)
    assert LLAMA3_8B.kv_bytes_per_token() == 131_072  # 32 layers x K,V x 8 heads x 128 x 2 B
    assert LLAMA3_8B.kv_bytes_per_token(kv_cache_dtype="fp8") == 65_536
    assert LLAMA3_8B.kv_bytes_per_token(tp=2) == 65_536


def test_h200_default_kv_cache_matches_the_measurement():
    """vLLM's formula with the H200's measured total memory at vLLM 0.24's default
    utilisation (0.92, not 0.9: results/h200/memory-probe.md) lands within the issue's 2%
    of the 920,192 tokens measured, in whole blocks."""
    plan = start({})
    assert not isinstance(plan, StartFailure)
    assert plan.requested_bytes == int(plan.total_bytes * 0.92)
    assert plan.kv_cache_tokens == pytest.approx(MEASURED_KV_TOKENS, rel=0.02)
    assert plan.kv_cache_tokens % 16 == 0


def test_vllm_defaults_on_h200():
    cfg = resolve({}, LLAMA3_8B, H200)
    assert (cfg.max_num_batched_tokens, cfg.max_model_len, cfg.block_size) == (8192, 8192, 16)
    assert cfg.enable_chunked_prefill and cfg.enable_prefix_caching and not cfg.enforce_eager
    off = resolve({"enable_chunked_prefill": False, "max_model_len": 16384},
                  LLAMA3_8B, H200)
    assert off.max_num_batched_tokens == 16384  # a whole prompt must fit in a step


def test_kv_cache_grows_with_utilisation_and_shrinks_with_budget():
    low, high = start({"gpu_memory_utilization": 0.5}), start({"gpu_memory_utilization": 0.95})
    assert high.kv_cache_tokens > low.kv_cache_tokens
    small, big = start({"max_num_batched_tokens": 2048}), start({"max_num_batched_tokens": 65536})
    assert small.kv_cache_tokens > big.kv_cache_tokens  # the profiling forward's activations
    fp8 = start({"kv_cache_dtype": "fp8"})
    assert fp8.kv_cache_tokens == pytest.approx(2 * start({}).kv_cache_tokens, rel=0.01)


def test_enforce_eager_frees_the_cuda_graph_pool():
    """Graphs are captured after the KV cache is allocated (vLLM's gpu_worker): at 0.995 the
    pool no longer fits above the requested memory, so only --enforce-eager starts, with
    more KV-cache tokens than any start with graphs."""
    graphs = start({"gpu_memory_utilization": 0.995})
    eager = start({"gpu_memory_utilization": 0.995, "enforce_eager": True})
    assert isinstance(graphs, StartFailure) and graphs.kind == "oom_cudagraph"
    assert "CUDA out of memory" in graphs.message
    assert eager.kv_cache_tokens > start({"gpu_memory_utilization": 0.99}).kv_cache_tokens
    assert eager.cudagraph_bytes == 0 and start({}).cudagraph_bytes > 0


@pytest.mark.parametrize("flags, kind, words", [
    ({"enable_chunked_prefill": False, "max_model_len": 2048, "max_num_batched_tokens": 128},
     "invalid_config", "max_num_batched_tokens (128) is smaller than max_model_len (2048)"),
    ({"max_num_batched_tokens": 64, "max_num_seqs": 128},
     "invalid_config", "max_num_batched_tokens (64) must be greater than or equal to max_num_seqs (128)"),
    ({"gpu_memory_utilization": 0.1}, "no_kv_memory", "No available memory for the cache blocks"),
    ({"gpu_memory_utilization": 0.12}, "kv_too_small",
     "To serve at least one request with the models's max seq len (8192)"),
    ({"max_model_len": 16384}, "invalid_config", "is greater than the derived max_model_len"),
    ({"tensor_parallel_size": 3}, "invalid_config", "must be divisible by tensor parallel size (3)"),
])
def test_refusals_carry_vllms_words(flags, kind, words):
    failure = start(flags)
    assert isinstance(failure, StartFailure)
    assert failure.kind == kind
    assert words in failure.message


def test_weights_that_do_not_fit_are_an_oom_at_load():
    huge = ModelShape(80, 8192, 64, 8, 28672, 128256, 8192)  # Llama-3-70B: ~131 GiB of bf16
    failure = start({}, shape=huge, gpu=load_gpu("h100"))
    assert isinstance(failure, StartFailure) and failure.kind == "oom_weights"
    assert failure.message.startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert not isinstance(start({"tensor_parallel_size": 4}, shape=huge, gpu=H200), StartFailure)


def test_tensor_parallel_splits_weights_and_kv():
    one, two = start({}), start({"tensor_parallel_size": 2})
    assert two.weight_bytes == pytest.approx(one.weight_bytes / 2, rel=0.001)
    assert two.kv_bytes_per_token == one.kv_bytes_per_token // 2
    assert two.kv_cache_tokens > 2 * one.kv_cache_tokens


def test_config_json_fields_are_read():
    shape = shape_from_config({"architectures": ["LlamaForCausalLM"],
                               "num_hidden_layers": 2, "hidden_size": 128,
                               "num_attention_heads": 4, "intermediate_size": 256,
                               "vocab_size": 1024, "max_position_embeddings": 4096})
    assert shape.num_key_value_heads == 4 and shape.head_dim == 32
    assert plan_memory(resolve({}, shape, H200), shape, H200, K).num_blocks > 0

"""Which tunable flags change the model's outputs: every catalogue flag classed ``lossless``
or ``lossy``, with a one-line reason and its source in vLLM's docs or code.

``lossless`` flags change speed and memory only: how many tokens and sequences a step holds,
how much memory the KV cache gets, how it is paged, whether CUDA graphs replay the same
kernels, how prefills are chunked and scheduled. They still reorder floating-point sums
(another batch, another split across GPUs), as the load itself does: vLLM is not batch
invariant unless ``VLLM_BATCH_INVARIANT=1`` (docs: features/batch_invariance), so greedy
outputs may differ at the last bit between any two loads. That is not a loss of precision.

``lossy`` flags change the numerics: values are stored or computed at a lower precision
than the model's. Only the values outside ``exact`` are lossy (``kv_cache_dtype = "auto"``
keeps the model's dtype; ``bfloat16`` or ``float16`` count as lossy, since they keep it only
when the model has that dtype). A study opts in per flag (``[space] lossy = [...]``); without it
the space refuses those values (``tuner.space.space.build_space``).

A separate table rather than a field on ``Param`` so that adding a flag to the catalogue
is one line there and one here; ``tests/unit/test_numerics.py`` fails for a flag not classed.
Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

Class = Literal["lossless", "lossy"]
LOSSLESS: Class = "lossless"
LOSSY: Class = "lossy"


@dataclass(frozen=True)
class Numerics:
    """A flag's class, why, where vLLM says so, and (lossy flags) its exact values."""

    cls: Class
    reason: str
    source: str
    exact: tuple[Any, ...] = ()  # lossy flags: the values that keep the model's numerics

    def lossy(self, value: Any) -> bool:
        return self.cls == LOSSY and value not in self.exact


_DOCS = "https://docs.vllm.ai/en/latest/"
_SCHED = "vllm/config/scheduler.py (SchedulerConfig)"

TABLE: Mapping[str, Numerics] = {
    "max_num_batched_tokens": Numerics(
        LOSSLESS, "the token budget of one scheduler step: what runs together, not how",
        _SCHED + "; " + _DOCS + "configuration/optimization/"),
    "max_model_len": Numerics(
        LOSSLESS, "the longest request accepted and the memory it reserves; positions and "
        "weights are the same", "vllm/config/model.py (ModelConfig.max_model_len)"),
    "gpu_memory_utilization": Numerics(
        LOSSLESS, "the memory share; what is left above the weights becomes KV-cache blocks",
        "vllm/config/cache.py (CacheConfig.gpu_memory_utilization)"),
    "enable_prefix_caching": Numerics(
        LOSSLESS, "reuses KV blocks already computed for the same prefix; vLLM: it \"won't "
        "change model outputs\"", _DOCS + "design/prefix_caching/"),
    "enable_chunked_prefill": Numerics(
        LOSSLESS, "splits a prompt's prefill over steps; the same attention over the same "
        "KV cache", _DOCS + "configuration/optimization/#chunked-prefill"),
    "enforce_eager": Numerics(
        LOSSLESS, "CUDA graphs replay the kernels eager mode runs; a speed and memory "
        "trade", _DOCS + "design/cuda_graphs/"),
    "max_num_seqs": Numerics(
        LOSSLESS, "the most sequences in one step: a batch size, not a precision", _SCHED),
    "block_size": Numerics(
        LOSSLESS, "tokens per paged KV block: where the cache lives, not its values",
        "vllm/config/cache.py (CacheConfig.block_size); " + _DOCS + "design/paged_attention/"),
    "kv_cache_dtype": Numerics(
        LOSSY, "fp8 stores K and V (with FlashAttention 3 also Q) in 8 bits; vLLM logs that "
        "it \"may cause accuracy drop without a proper scaling factor\"",
        "vllm/config/cache.py (CacheConfig._verify_cache_dtype); " + _DOCS
        + "features/quantization/quantized_kvcache/", exact=("auto",)),
    "tensor_parallel_size": Numerics(
        LOSSLESS, "splits each layer's weights across GPUs at the same precision; only the "
        "order of the all-reduce sums changes", _DOCS + "serving/parallelism_scaling/"),
    # The V1 scheduler's and compiler's flags (opt-in; docs/flags.md). Sources are vLLM
    # 0.24.0's and 0.32.0's code.
    "async_scheduling": Numerics(
        LOSSLESS, "overlaps scheduling step N+1 with running step N; the same steps",
        "vllm/config/vllm.py (async_scheduling None -> True); vllm/v1/engine/core.py"),
    "long_prefill_token_threshold": Numerics(
        LOSSLESS, "caps a prompt's chunk per step: the same attention over the same KV cache",
        "vllm/v1/core/sched/scheduler.py (num_new_tokens capped at the threshold)"),
    "max_num_partial_prefills": Numerics(
        LOSSLESS, "how many prompts are chunked at once: scheduling, not numerics",
        _SCHED + " (__post_init__, verify_max_model_len; gone in 0.32)"),
    "max_long_partial_prefills": Numerics(
        LOSSLESS, "how many long prompts are chunked at once: scheduling, not numerics",
        _SCHED + " (verify_max_model_len; gone in 0.32)"),
    "scheduling_policy": Numerics(
        LOSSLESS, "the order waiting requests are admitted in",
        "vllm/v1/core/sched/request_queue.py"),
    "stream_interval": Numerics(
        LOSSLESS, "tokens per streamed chunk: when the client sees tokens, not which",
        "vllm/v1/engine/output_processor.py (stream_interval)"),
    "max_cudagraph_capture_size": Numerics(
        LOSSLESS, "which batch sizes replay CUDA graphs of the same kernels",
        "vllm/config/compilation.py (max_cudagraph_capture_size)"),
    "optimization_level": Numerics(
        LOSSLESS, "torch.compile and CUDA graphs at the model's precision; fused kernels "
        "reorder sums as any batch does", "vllm/config/vllm.py (OptimizationLevel)"),
    "performance_mode": Numerics(
        LOSSLESS, "graph sizes, batching and kernel choices at the model's precision",
        "vllm/config/vllm.py (performance_mode)"),
}


def numerics(name: str) -> Numerics:
    """The class of flag ``name``; KeyError when the catalogue flag was never classed."""
    try:
        return TABLE[name]
    except KeyError:
        raise KeyError(f"flag {name!r} is not classed lossless or lossy in "
                       "tuner/numerics.py") from None


def is_lossy(name: str, value: Any) -> bool:
    """Whether ``name = value`` changes the model's numerics (unknown flags: no)."""
    entry = TABLE.get(name)
    return entry is not None and entry.lossy(value)


def lossy_flags(flags: Mapping[str, Any]) -> dict[str, Any]:
    """The flags of a configuration whose values are lossy (empty: a lossless one)."""
    return {k: v for k, v in flags.items() if is_lossy(k, v)}


def lossy_names() -> tuple[str, ...]:
    """The flags that have lossy values (those a study may opt in to)."""
    return tuple(k for k, v in TABLE.items() if v.cls == LOSSY)

"""vLLM's own defaults for the tuned flags, as the V1 engine of vLLM 0.2x picks them.

They depend on the hardware: ``EngineArgs.get_batch_defaults`` gives GPUs of 70 GiB or
more (except the A100) a budget of 8192 tokens and 1024 sequences for the API server,
smaller GPUs 2048 and 256, and the CPU build 2048 and 128. Chunked prefill and prefix
caching are on by default in V1. ``max_model_len`` defaults to the model's context.
"""

from __future__ import annotations

from typing import Any, Mapping

CAPTURE_TOP = 512  # vLLM's largest default CUDA-graph capture size, in tokens


def cudagraph_capture_size(max_num_seqs: int) -> int:
    """The largest step (in tokens) that runs as a CUDA graph when the launch leaves the
    capture size to vLLM: min(2 * max_num_seqs, 512) in 0.24 (config/compilation.py) and
    0.32 (capped at 512)."""
    return min(2 * int(max_num_seqs), CAPTURE_TOP)


def batch_defaults(gpu_memory_gib: float, gpu_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that vLLM's API server picks on this device."""
    name = gpu_name.lower()
    if name == "cpu":
        return 2048, 128
    if gpu_memory_gib >= 70 and "a100" not in name:
        return 8192, 1024
    return 2048, 256


def vllm_defaults(model_max_len: int, gpu_memory_gib: float, gpu_name: str,
                  tensor_parallel_size: int = 1) -> dict[str, Any]:
    """Every tuned flag's value when `vllm serve` is started without it."""
    budget, seqs = batch_defaults(gpu_memory_gib, gpu_name)
    return {
        "max_num_batched_tokens": budget,
        "max_model_len": model_max_len,
        # vLLM 0.24 raised it from 0.9 (vllm/config/cache.py: CacheConfig default 0.92;
        # its log on the H200: "Requested memory: 0.920000 (util)")
        "gpu_memory_utilization": 0.92,
        "enable_prefix_caching": True,
        "enable_chunked_prefill": True,
        "enforce_eager": False,
        "max_num_seqs": seqs,
        "block_size": 128 if gpu_name.lower() == "cpu" else 16,
        "kv_cache_dtype": "auto",
        "tensor_parallel_size": tensor_parallel_size,
        **V1_DEFAULTS,
        "max_cudagraph_capture_size": cudagraph_capture_size(seqs),
    }


def resolve_launch(launch: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The flags a launch runs with when it leaves some to vLLM: those it gives, vLLM's
    ``defaults`` for the rest, except the ones vLLM derives from what was given
    (``EngineArgs._set_default_max_num_seqs_and_batched_tokens_args``, 0.24 and 0.32): an
    absent token budget is the default's, at least max_model_len without chunked prefill
    and at most max_num_seqs x max_model_len; absent sequences are the default's, at most
    the budget (the article's ``--max-num-batched-tokens 256`` runs 256 sequences, not
    1,024); an absent CUDA-graph capture size follows the sequences."""
    flags = {**defaults, **launch}
    if "max_num_batched_tokens" not in launch and "max_num_batched_tokens" in defaults:
        budget, mml = int(defaults["max_num_batched_tokens"]), int(flags["max_model_len"])
        if not flags.get("enable_chunked_prefill", True):
            budget = max(budget, mml)
        flags["max_num_batched_tokens"] = min(int(flags["max_num_seqs"]) * mml, budget)
    if "max_num_seqs" not in launch and "max_num_seqs" in defaults:
        flags["max_num_seqs"] = min(int(defaults["max_num_seqs"]),
                                    int(flags["max_num_batched_tokens"]))
    if "max_cudagraph_capture_size" not in launch and "max_cudagraph_capture_size" in defaults:
        flags["max_cudagraph_capture_size"] = cudagraph_capture_size(flags["max_num_seqs"])
    return flags


# The V1 scheduler's flags as vLLM 0.24 and 0.32 resolve them when absent (their parsers
# print None for async_scheduling: VllmConfig turns it on where the executor supports it).
V1_DEFAULTS: dict[str, Any] = {
    "async_scheduling": True,
    "long_prefill_token_threshold": 0,
    "max_num_partial_prefills": 1,
    "max_long_partial_prefills": 1,
    "scheduling_policy": "fcfs",
    "stream_interval": 1,
    "optimization_level": 2,
    "performance_mode": "balanced",
}

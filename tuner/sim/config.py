"""The engine's resolved configuration: the tuned flags with vLLM's defaults filled in."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from tuner.sim.profiles import GpuProfile
from tuner.sim.shape import ModelShape

# The search space's parameter names (the flags dict of the offline evaluator).
FLAG_NAMES = (
    "max_num_batched_tokens", "max_model_len", "gpu_memory_utilization",
    "enable_prefix_caching", "enable_chunked_prefill", "enforce_eager", "max_num_seqs",
    "block_size", "kv_cache_dtype", "tensor_parallel_size",
)


@dataclass(frozen=True)
class EngineConfig:
    """Every flag that shapes the simulated engine, after defaults."""

    max_num_batched_tokens: int
    max_model_len: int
    gpu_memory_utilization: float = 0.92  # vLLM 0.24's CacheConfig default (0.9 before)
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    enforce_eager: bool = False
    max_num_seqs: int = 256
    block_size: int = 16
    kv_cache_dtype: str = "auto"
    tensor_parallel_size: int = 1
    dtype: str = "auto"
    seed: int = 0
    # The V1 scheduler's flags the model learns (docs/simulator.md): the threshold caps a
    # prompt's chunk per step; partial prefills act only through their start checks and the
    # threshold they imply, as in vLLM 0.24's V1 scheduler; priority orders like fcfs when
    # requests carry no priority (ours carry none).
    long_prefill_token_threshold: int = 0
    max_num_partial_prefills: int = 1
    max_long_partial_prefills: int = 1
    scheduling_policy: str = "fcfs"

    def flags(self) -> dict[str, Any]:
        """The tuned flags only, keyed by the search space's names."""
        return {name: getattr(self, name) for name in FLAG_NAMES}


def resolve(flags: Mapping[str, Any], shape: ModelShape, gpu: GpuProfile) -> EngineConfig:
    """Fill absent (or None) flags as vLLM V1 does on this GPU (get_batch_defaults)."""
    given = {k: v for k, v in flags.items() if v is not None}
    unknown = set(given) - {f.name for f in fields(EngineConfig)}
    if unknown:
        raise ValueError(f"unknown engine flags: {', '.join(sorted(unknown))}")
    chunked = bool(given.get("enable_chunked_prefill", True))
    max_model_len = int(given.get("max_model_len", shape.max_position_embeddings))
    budget = given.get("max_num_batched_tokens")
    if budget is None:
        budget = gpu.default_max_num_batched_tokens
        if not chunked:  # a whole prompt must fit in one step
            budget = max(budget, max_model_len)
    seqs = given.get("max_num_seqs")
    if seqs is None:
        seqs = min(gpu.default_max_num_seqs, int(budget))
    threshold = int(given.get("long_prefill_token_threshold", 0))
    if int(given.get("max_num_partial_prefills", 1)) > 1 and threshold == 0:
        threshold = int(max_model_len * 0.04)  # vLLM 0.24 SchedulerConfig.__post_init__
    merged = {**given, "max_num_batched_tokens": int(budget), "max_model_len": max_model_len,
              "max_num_seqs": int(seqs), "enable_chunked_prefill": chunked,
              "long_prefill_token_threshold": threshold}
    return EngineConfig(**merged)


def weight_dtype_bytes(cfg: EngineConfig, shape: ModelShape) -> int:
    """Bytes per weight: --dtype, or the config's torch_dtype (fp32 served as bf16)."""
    if cfg.dtype in ("float16", "half", "bfloat16"):
        return 2
    if cfg.dtype == "float32":
        return 4
    return 2 if shape.torch_dtype == "float32" else shape.dtype_bytes

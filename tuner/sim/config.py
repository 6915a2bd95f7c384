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
    merged = {**given, "max_num_batched_tokens": int(budget), "max_model_len": max_model_len,
              "max_num_seqs": int(seqs), "enable_chunked_prefill": chunked}
    return EngineConfig(**merged)


def weight_dtype_bytes(cfg: EngineConfig, shape: ModelShape) -> int:
    """Bytes per weight: --dtype, or the config's torch_dtype (fp32 served as bf16)."""
    if cfg.dtype in ("float16", "half", "bfloat16"):
        return 2
    if cfg.dtype == "float32":
        return 4
    return 2 if shape.torch_dtype == "float32" else shape.dtype_bytes

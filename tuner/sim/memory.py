"""The memory budget of one GPU, as vLLM V1 profiles it at start (pure).

vLLM (``gpu_worker.determine_available_memory``):
    requested   = total_memory x gpu_memory_utilization
    non_kv      = weights + peak activation of a dummy forward of max_num_batched_tokens
                  (and the sampler warm-up) + memory allocated outside torch
    kv_cache    = requested - non_kv, cut into blocks of block_size tokens
The CUDA-graph pool is captured after the KV cache is allocated, so it must fit in the
memory left above ``requested`` (the profile's ``cudagraph_in_kv_budget`` flips that).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.sim.config import EngineConfig, weight_dtype_bytes
from tuner.sim.profiles import GIB, EngineConstants, GpuProfile
from tuner.sim.shape import ModelShape


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes per GPU of each part, and the KV cache that results."""

    total_bytes: int
    requested_bytes: int
    weight_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_bytes: int
    kv_bytes_per_token: int
    num_blocks: int
    block_size: int

    @property
    def kv_cache_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def non_kv_bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes + self.non_torch_bytes


def activation_bytes(cfg: EngineConfig, shape: ModelShape, k: EngineConstants) -> int:
    """Peak of the profiling forward (grows with the token budget) or of the sampler warm-up."""
    tp = cfg.tensor_parallel_size
    per_token = 3 * shape.intermediate_size / tp + k.activation_hidden_multiple * shape.hidden_size
    forward = cfg.max_num_batched_tokens * per_token * weight_dtype_bytes(cfg, shape)
    requests = min(cfg.max_num_seqs, cfg.max_num_batched_tokens)
    sampler = requests * shape.vocab_size * k.sampler_bytes_per_logit
    return int(max(forward, sampler))


def cudagraph_bytes(cfg: EngineConfig, shape: ModelShape, k: EngineConstants) -> int:
    """The CUDA-graph pool (0 with --enforce-eager), scaled from the 8B measurement."""
    if cfg.enforce_eager:
        return 0
    scale = (shape.num_hidden_layers * shape.hidden_size) / (32 * 4096)
    return int(k.cudagraph_pool_gib_8b * scale * GIB / cfg.tensor_parallel_size ** 0.5)


def plan_memory(cfg: EngineConfig, shape: ModelShape, gpu: GpuProfile,
                k: EngineConstants) -> MemoryPlan:
    """The memory plan of one GPU; kv_cache_bytes may be <= 0 (the start checks refuse it)."""
    tp = cfg.tensor_parallel_size
    total = gpu.torch_total_bytes
    requested = int(total * cfg.gpu_memory_utilization)
    weights = shape.weight_bytes(tp, weight_dtype_bytes(cfg, shape))
    non_torch = int((k.non_torch_gib + k.non_torch_gib_per_extra_rank * (tp > 1)) * GIB)
    graphs = cudagraph_bytes(cfg, shape, k)
    act = activation_bytes(cfg, shape, k)
    kv = requested - weights - act - non_torch - (graphs if k.cudagraph_in_kv_budget else 0)
    per_token = shape.kv_bytes_per_token(tp, cfg.kv_cache_dtype)
    blocks = max(0, kv // (per_token * cfg.block_size))
    return MemoryPlan(total, requested, weights, act, non_torch, graphs, kv, per_token,
                      blocks, cfg.block_size)

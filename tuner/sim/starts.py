"""How long a vLLM start takes, phase by phase, and vLLM's compile key (pure).

``model_start`` returns the seconds of each phase that ``tuner.engine.startlog.start_phases``
reads from a real log (process_start, api_start, engine_start, weights, compile,
kv_profile, graph_capture, warmup, api_ready). Its inputs are what decides them in vLLM
0.24.0's measured starts (profiles.toml ``[start]`` gives each constant its measurement):

- the start path: a plain start pays the API server's imports before its first line, a
  pre-imported one (forked from a process that imported vLLM) does not;
- how the engine core starts: spawned it imports torch and vLLM again, forked
  (``VLLM_WORKER_MULTIPROC_METHOD=fork``) it does not;
- whether the compile key was seen on this cache (a hit loads the compiled graph and
  finds the kernels autotuned; a miss compiles and warms up for longer);
- ``--enforce-eager``: no compile, no CUDA-graph capture;
- the weights' size (the load scales with it) and the CUDA-graph capture sizes (the
  capture scales with their count).

Where it is coarse (docs/simulator.md, "Start", gives the figures): one set of constants,
from one H100 run with an 8B model and dummy weights, serves every GPU profile and model;
weights read from disk, a cold machine's late first start and the longer profiling run
after a miss are not modelled; the warm-up after a miss is charged in full even where
Inductor's and Triton's caches are warm.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from tuner.sim.config import EngineConfig
from tuner.sim.profiles import GIB, EngineConstants, StartConstants
from tuner.sim.shape import ModelShape

# vLLM 0.24's CUDA-graph capture sizes up to 512 tokens, as its log lists them
# (results/h100/start-profile/default-start-0.log: cudagraph_capture_sizes).
CAPTURE_SIZES = (1, 2, 4, *range(8, 257, 8), *range(272, 513, 16))


@dataclass(frozen=True)
class StartPhases:
    """Seconds per phase of one start, named as ``start_phases`` names them; ``compile``
    and ``graph_capture`` are None for an eager start, ``compile_cache`` is hit, miss or
    None (eager)."""

    process_start: float
    api_start: float
    engine_start: float
    weights: float
    compile: float | None
    kv_profile: float
    graph_capture: float | None
    warmup: float
    api_ready: float
    compile_cache: str | None

    @property
    def init_engine(self) -> float:
        """The engine core's stated total: compile, profiling, capture and warm-up."""
        return (self.compile or 0.0) + self.kv_profile + (self.graph_capture or 0.0) + self.warmup

    @property
    def total(self) -> float:
        """From the spawn to the API server's startup complete."""
        return (self.process_start + self.api_start + self.engine_start + self.init_engine
                + self.api_ready)


def capture_size(cfg: EngineConfig, k: EngineConstants) -> int:
    """The largest CUDA-graph capture size: min(2 x sequences, the engine's cap), at most the
    budget (vLLM 0.24's ``VllmConfig._set_cudagraph_sizes``; docs/starts.md)."""
    return min(2 * cfg.max_num_seqs, k.max_cudagraph_capture_size, cfg.max_num_batched_tokens)


def compile_key(cfg: EngineConfig, shape: ModelShape, k: EngineConstants) -> dict[str, Any] | None:
    """What of the configuration enters vLLM 0.24's compile key (``VllmConfig.compute_hash``,
    docs/starts.md's table): the model, its dtype, the budget, the largest capture size,
    the model length, the KV cache's block size and dtype, tensor parallelism. None for an
    eager start (nothing is compiled). Flags outside the key (memory utilisation, prefix
    caching, chunked prefill, scheduling) leave it unchanged."""
    if cfg.enforce_eager:
        return None
    return {"model": asdict(shape), "dtype": cfg.dtype,
            "max_num_batched_tokens": cfg.max_num_batched_tokens,
            "capture_size": capture_size(cfg, k), "max_model_len": cfg.max_model_len,
            "block_size": cfg.block_size, "kv_cache_dtype": cfg.kv_cache_dtype,
            "tensor_parallel_size": cfg.tensor_parallel_size}


def key_hash(key: dict[str, Any]) -> str:
    """A stable 10-hex-digit name for ``key`` (vLLM names its cache folders so), the same in
    every process and on every host."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]


def model_start(cfg: EngineConfig, weight_bytes: int, k: StartConstants, engine: EngineConstants,
                *, preimported: bool = False, fork: bool = False,
                hit: bool = False) -> StartPhases:
    """The phases of a start of ``cfg`` with ``weight_bytes`` of weights: pre-imported or
    plain, its engine core forked or spawned, its compile key seen before (``hit``) or not.
    ``hit`` is ignored for an eager start."""
    weights = weight_bytes / GIB * k.weights_s_per_gib
    compiled = not cfg.enforce_eager
    sizes = sum(1 for s in CAPTURE_SIZES if s <= capture_size(cfg, engine))
    hit = hit or not compiled  # an eager start warms up as a hit does (coarse)
    return StartPhases(
        process_start=k.preimported_imports_s if preimported else k.imports_s,
        api_start=k.fork_engine_core_s if fork else k.spawn_engine_core_s,
        engine_start=k.engine_setup_s + weights, weights=weights,
        compile=(k.compile_hit_s if hit else k.compile_miss_s) if compiled else None,
        kv_profile=k.kv_profile_s,
        graph_capture=sizes * k.capture_s_per_size if compiled else None,
        warmup=k.warmup_hit_s if hit else k.warmup_miss_s,
        api_ready=k.api_ready_s,
        compile_cache=("hit" if hit else "miss") if compiled else None)

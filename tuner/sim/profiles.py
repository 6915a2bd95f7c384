"""GPU profiles and engine constants, read from ``profiles.toml`` (each value with its source)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from tuner.errors import UsageError

PROFILES_FILE = Path(__file__).with_name("profiles.toml")
ENGINE_BY_GPU = "engine_by_gpu"  # profiles.toml's tables of per-GPU engine constants
MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class GpuProfile:
    """One GPU model: memory, dense tensor throughput, bandwidths, vLLM's batch defaults."""

    key: str
    name: str
    memory_total_mib: int  # what NVML (nvidia-smi) reports
    bf16_tflops: float
    fp8_tflops: float
    memory_bandwidth_gbps: float
    interconnect_gbps: float
    default_max_num_batched_tokens: int
    default_max_num_seqs: int
    driver_reserved_mib: int

    @property
    def torch_total_bytes(self) -> int:
        """Total memory as torch.cuda.mem_get_info reports it (vLLM's `total_memory`)."""
        return (self.memory_total_mib - self.driver_reserved_mib) * MIB


@dataclass(frozen=True)
class EngineConstants:
    """Modelling constants of the engine itself (see profiles.toml for their sources)."""

    compute_efficiency: float
    bandwidth_efficiency: float
    step_overhead_ms: float
    per_sequence_overhead_us: float
    eager_launch_us_per_layer: float
    graph_launch_us_per_layer: float
    max_cudagraph_capture_size: int
    cudagraph_pool_gib_8b: float
    cudagraph_in_kv_budget: bool
    non_torch_gib: float
    non_torch_gib_per_extra_rank: float
    activation_hidden_multiple: float
    sampler_bytes_per_logit: float
    allreduce_latency_us: float
    driver_reserved_mib: int
    # Terms added by the H200 calibration (bench/calibrate_sim.py); 0 / False: without them.
    compiled_launch_us_per_layer: float = 110.0
    piecewise_launch_us_per_layer: float = 4.0  # 4.0: as a full graph (without the term)
    # The gap model (tuner.sim.gaps): shares of a token's gap that wait for part of, or a
    # whole, next step; 0: every gap is its step's duration.
    late_gap_share: float = 0.0
    late_gap_share_launch_bound: float = 0.0
    doubled_gap_share_multi_prefill: float = 0.0
    unchunked_mixes_decodes: bool = False
    # The API server's share of a request's TTFT: from its arrival to the engine core's
    # queue (parsing, tokenising, handing it over); 0: the request is queued on arrival.
    front_end_ms: float = 0.0


@dataclass(frozen=True)
class StartConstants:
    """Seconds of a vLLM start's phases (``tuner.sim.starts``; profiles.toml's ``[start]``)."""

    imports_s: float
    preimported_imports_s: float
    spawn_engine_core_s: float
    fork_engine_core_s: float
    engine_setup_s: float
    weights_s_per_gib: float
    compile_miss_s: float
    compile_hit_s: float
    kv_profile_s: float
    capture_s_per_size: float
    warmup_miss_s: float
    warmup_hit_s: float
    api_ready_s: float


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        return tomllib.load(f)


def _values(table: dict[str, Any]) -> dict[str, Any]:
    return {k: v["value"] for k, v in table.items()}


def sources(path: Path = PROFILES_FILE) -> dict[str, dict[str, str]]:
    """Every constant's source, by section ("engine", "start", "gpu.h200",
    "engine_by_gpu.h100", ...) and name."""
    data = _load(str(path))
    out = {section: {k: v["source"] for k, v in data[section].items()}
           for section in ("engine", "start")}
    for group in ("gpu", ENGINE_BY_GPU):
        for key, table in data.get(group, {}).items():
            out[f"{group}.{key}"] = {k: v["source"] for k, v in table.items()}
    return out


def gpu_names(path: Path = PROFILES_FILE) -> list[str]:
    return sorted(_load(str(path))["gpu"])


def engine_constants(gpu: str | None = None, path: Path = PROFILES_FILE) -> EngineConstants:
    """The engine constants of ``[engine]``; with ``gpu``, those of
    ``[engine_by_gpu.<gpu>]`` (constants fitted on that GPU's measurements) replace them."""
    data = _load(str(path))
    values = _values(data["engine"])
    if gpu is not None:
        values.update(_values(data.get(ENGINE_BY_GPU, {}).get(gpu, {})))
    return EngineConstants(**values)


def start_constants(path: Path = PROFILES_FILE) -> StartConstants:
    return StartConstants(**_values(_load(str(path))["start"]))


def load_gpu(key: str, path: Path = PROFILES_FILE) -> GpuProfile:
    """The profile named ``key`` (h200, h100, a100-80g, l4); UsageError if unknown."""
    data = _load(str(path))
    if key not in data["gpu"]:
        raise UsageError(f"unknown GPU {key!r}: choose one of {', '.join(gpu_names(path))}")
    reserved = data["engine"]["driver_reserved_mib"]["value"]
    return GpuProfile(key=key, driver_reserved_mib=reserved, **_values(data["gpu"][key]))

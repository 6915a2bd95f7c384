"""The `vllm serve` command line the simulator accepts (the same words the trial runner passes
to ``python -m vllm.entrypoints.openai.api_server``), plus ``--gpu`` and ``--time-scale``."""

from __future__ import annotations

import argparse
from typing import Any

from tuner.sim.profiles import gpu_names

DTYPES = ("auto", "bfloat16", "float16", "half", "float32")
KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")


def _positive_scale(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"time scale must be > 0, got {text}")
    return value


def cpu_list(text: str) -> set[int]:
    """``"1"``, ``"0,2"`` or ``"2-3"`` as a set of CPU numbers."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a CPU list: {text!r}") from None
    if not cpus or min(cpus) < 0:
        raise argparse.ArgumentTypeError(f"not a CPU list: {text!r}")
    return cpus


def add_serve_flags(p: argparse.ArgumentParser) -> None:
    """vLLM's flags with vLLM's defaults (None: decided at start from the GPU and model)."""
    bool_flag = argparse.BooleanOptionalAction
    p.add_argument("model_tag", nargs="?", help="model folder (as `vllm serve MODEL`)")
    p.add_argument("--model", help="model folder with a config.json")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--dtype", choices=DTYPES, default="auto")
    p.add_argument("--load-format", default="auto")
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    p.add_argument("--block-size", type=int, choices=(1, 8, 16, 32, 64, 128), default=16)
    p.add_argument("--kv-cache-dtype", choices=KV_DTYPES, default="auto")
    p.add_argument("--enable-prefix-caching", action=bool_flag, default=True)
    p.add_argument("--enable-chunked-prefill", action=bool_flag, default=True)
    p.add_argument("--enforce-eager", action=bool_flag, default=False)
    p.add_argument("--num-gpu-blocks-override", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--disable-log-requests", action="store_true")
    p.add_argument("--disable-log-stats", action="store_true")
    p.add_argument("--gpu", choices=gpu_names(), default="h200",
                   help="simulated GPU profile (tuner/sim/profiles.toml); default h200")
    p.add_argument("--time-scale", type=_positive_scale, default=1.0,
                   help="simulated time runs this many times faster than wall time")
    p.add_argument("--sim-cpus", type=cpu_list, metavar="LIST",
                   help="run the server on these CPUs only (e.g. 1 or 2-3): with the load "
                        "generator on the others, a small machine keeps real time")
    p.add_argument("--sim-trace", action="store_true",
                   help="keep each request's modelled token times at /sim/trace (benchmarks)")


def engine_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The engine flags dict (the search space's names) from parsed arguments."""
    return {
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "max_model_len": args.max_model_len,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "enable_prefix_caching": args.enable_prefix_caching,
        "enable_chunked_prefill": args.enable_chunked_prefill,
        "enforce_eager": args.enforce_eager,
        "max_num_seqs": args.max_num_seqs,
        "block_size": args.block_size,
        "kv_cache_dtype": args.kv_cache_dtype,
        "tensor_parallel_size": args.tensor_parallel_size,
        "dtype": args.dtype,
        "seed": args.seed,
    }

"""The `vllm serve` command line the simulator accepts (the same words the trial runner passes
to ``python -m vllm.entrypoints.openai.api_server``), plus ``--gpu`` and ``--time-scale``."""

from __future__ import annotations

import argparse
from typing import Any, Sequence

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
    p.add_argument("--long-prefill-token-threshold", type=int, default=0)
    p.add_argument("--max-num-partial-prefills", type=int, default=1)
    p.add_argument("--max-long-partial-prefills", type=int, default=1)
    p.add_argument("--scheduling-policy", choices=("fcfs", "priority"), default="fcfs")
    _add_refused_flags(p)
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
    p.add_argument("--sim-start-delay", action="store_true",
                   help="listen only once the modelled start is over (its seconds divided by "
                        "the time scale); default: at once, the log still shows the phases")
    p.add_argument("--sim-start-path", choices=("plain", "preimported"), default="plain",
                   help="model a plain start or one forked from a process that imported "
                        "vLLM (the runner always starts the simulator plainly)")


# vLLM flags the model cannot learn: accepted at the value it models (None: none), refused
# otherwise, and left out of `--help=all` so that no study tunes them here.
REFUSED: dict[str, tuple[object, str]] = {
    "async_scheduling": (True, "the model was calibrated with async scheduling on (vLLM "
                               "0.24's default); a synchronous scheduler's host gaps are not "
                               "modelled"),
    "stream_interval": (1, "the front end sends every token as it is made"),
    "max_cudagraph_capture_size": (None, "CUDA-graph sizes are a fixed engine constant "
                                         "(profiles.toml: max_cudagraph_capture_size)"),
    "cudagraph_capture_sizes": (None, "CUDA-graph sizes are a fixed engine constant"),
    "optimization_level": (None, "compile levels change kernels the model does not see"),
    "performance_mode": (None, "kernel and graph choices are not modelled"),
    "compilation_config": (None, "compilation is not modelled"),
}


def _add_refused_flags(p: argparse.ArgumentParser) -> None:
    hide = argparse.SUPPRESS
    p.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, help=hide)
    p.add_argument("--stream-interval", type=int, help=hide)
    p.add_argument("--max-cudagraph-capture-size", type=int, help=hide)
    p.add_argument("--cudagraph-capture-sizes", type=int, nargs="+", help=hide)
    p.add_argument("--optimization-level", "-O", help=hide)
    p.add_argument("--performance-mode", help=hide)
    p.add_argument("--compilation-config", "-cc", help=hide)


def refused(args: argparse.Namespace) -> str | None:
    """Why the simulator will not run these flags (one line), or None."""
    for name, (modelled, why) in REFUSED.items():
        value = getattr(args, name, None)
        if value is not None and value != modelled:
            flag = "--" + name.replace("_", "-")
            shown = f"--no-{flag[2:]}" if value is False else f"{flag} {value}"
            return f"tuner sim does not simulate {shown}: {why} (docs/simulator.md)"
    return None


def help_answer(gpu: str, prog: str = "tuner sim serve") -> str:
    """What `tuner sim serve --gpu GPU --help=all` prints: the engine, its version and the
    batch defaults it uses on that GPU (as vLLM's probe answers), then every flag it accepts
    with its default (argparse's defaults formatter, as vLLM's)."""
    from tuner import __version__
    from tuner.sim.profiles import load_gpu

    parser = argparse.ArgumentParser(prog=prog, add_help=False,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_serve_flags(parser)
    for action in parser._actions:  # argparse prints a default only beside some help text
        if action.help is None:
            action.help = "as vLLM's"
    profile = load_gpu(gpu)
    return (f"tuner-probe: engine tuner-sim {__version__}\n"
            f"tuner-probe: batch {profile.default_max_num_batched_tokens} "
            f"{profile.default_max_num_seqs} {gpu}\n" + parser.format_help())


def wants_help_all(argv: list[str]) -> str | None:
    """The GPU of `serve ... --help=all` (default h200), or None when not asked."""
    if "--help=all" not in argv:
        return None
    for i, word in enumerate(argv):
        if word == "--gpu" and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith("--gpu="):
            return word.split("=", 1)[1]
    return "h200"


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
        "long_prefill_token_threshold": args.long_prefill_token_threshold,
        "max_num_partial_prefills": args.max_num_partial_prefills,
        "max_long_partial_prefills": args.max_long_partial_prefills,
        "scheduling_policy": args.scheduling_policy,
    }


def parse_engine_flags(argv: Sequence[str]) -> dict[str, Any]:
    """The engine flags dict of `vllm serve` flags ``argv`` (without the model), as the
    simulator would read them."""
    parser = argparse.ArgumentParser()
    add_serve_flags(parser)
    return engine_flags(parser.parse_args(["--model", "m", *argv]))

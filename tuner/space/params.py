"""The tunable `vllm serve` flags: spelling, type, range, scale and vLLM's own default.

Parameter names are vLLM's engine-argument names (``max_num_batched_tokens``); the flag
spelling is derived from them (``--max-num-batched-tokens``). Booleans are rendered as
``--enable-x`` / ``--no-enable-x`` so that every value is explicit on the command line.
Pure data: nothing here touches a process or a database.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["int", "float", "bool", "choice"]


@dataclass(frozen=True)
class Param:
    """One tunable flag.

    ``low``/``high`` bound ints and floats (inclusive); ``log`` samples on a log scale;
    ``step`` makes a float discrete; ``choices`` lists the values of a ``choice``.
    ``bounds`` (inclusive) and ``accepted`` are what vLLM itself takes, wider than the
    range searched by default: a study may fix or search any value inside them (the CPU
    build's block size 128, a memory share of 0.4), nothing outside (``problem``).
    ``vllm_default`` is the value vLLM uses when the flag is absent (see ``defaults.py``
    for those that depend on the GPU); ``None`` means "derived at start" (e.g. the
    model's context length).
    """

    name: str
    kind: Kind
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    help: str = ""
    bounds: tuple[float, float] | None = None
    accepted: tuple[str, ...] = ()
    # Opt-in flags are tuned only when the study names them in [space.ranges] (or fixes
    # them); otherwise they stay off the command line at vLLM's default. ``why`` says what
    # the flag does to a trial (its class and vLLM source: numerics.py).
    opt_in: bool = False
    why: str = ""
    # A mode switch: other flags act differently on each side of it (without chunked
    # prefill the token budget must hold a whole prompt), so a model of the trials should
    # not assume that they vary alike on both sides (``tuner.search.front.gp``'s cells).
    mode: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def contains(self, value: Any) -> bool:
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "choice":
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind == "int" and int(value) != value:
            return False
        return self.low <= value <= self.high

    def problem(self, value: Any) -> str | None:
        """Why vLLM would refuse ``value`` for this flag (type, then bounds), or None."""
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"{value!r} is not true or false"
        if self.accepted:
            if value in self.accepted and isinstance(value, str):
                return None
            return f"{value!r} is not one of {', '.join(self.accepted)}"
        integral = self.kind == "int" or (self.kind == "choice" and
                                          all(isinstance(c, int) for c in self.choices))
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not numeric or (integral and not isinstance(value, int)):
            return f"{value!r} is not {'an integer' if integral else 'a number'}"
        lo, hi = self.bounds or (-math.inf, math.inf)
        if not lo <= value <= hi:  # also refuses nan
            low, high = _number(lo), _number(hi)
            return (f"{value!r} is outside {low}..{high}, the values vLLM accepts; "
                    f"give {'an integer' if integral else 'a number'} from {low} to {high}")
        return None

    def argv(self, value: Any) -> list[str]:
        """The command-line words for ``value`` (booleans explicit either way)."""
        if self.kind == "bool":
            return [self.flag] if value else ["--no-" + self.flag[2:]]
        if self.kind == "float":
            return [self.flag, f"{value:g}"]
        return [self.flag, str(value)]


# The V1 scheduler's and compiler's flags (all lossless: they change when work is done, never
# the numbers computed). Opt-in: each costs trials, and several are inert for our workloads.
# Sources are vLLM 0.24.0's and 0.32.0's vllm/config/ and vllm/v1/ (docs/flags.md).
V1_SCHEDULER: tuple[Param, ...] = (
    Param("async_scheduling", "bool", opt_in=True,
          help="schedule step N+1 while step N runs on the GPU",
          why="hides the scheduler's CPU time behind the GPU step; on by default where the "
              "executor supports it"),
    Param("long_prefill_token_threshold", "choice", choices=(0, 256, 512, 1024, 2048, 4096),
          bounds=(0, 2**24), opt_in=True,
          help="most tokens one prompt's chunk may take in a step (0: no cap)",
          why="caps a long prompt's chunk so that other prompts and decodes share the budget"),
    Param("max_num_partial_prefills", "int", 1, 8, bounds=(1, 1024), opt_in=True,
          help="prompts that may be partly prefilled at once (vLLM <= 0.2x)",
          why="in the V1 scheduler of 0.24 only its start check and the threshold it implies "
              "(4% of max_model_len when > 1) act; removed by 0.32"),
    Param("max_long_partial_prefills", "int", 1, 8, bounds=(1, 1024), opt_in=True,
          help="long prompts among the partial prefills (vLLM <= 0.2x)",
          why="must not exceed max_num_partial_prefills; otherwise unused by the V1 scheduler"),
    Param("scheduling_policy", "choice", choices=("fcfs", "priority"),
          accepted=("fcfs", "priority"), opt_in=True, help="order of waiting requests",
          why="with no request priorities (our load generator sends none) priority orders "
              "by arrival like fcfs; it differs only in whom it preempts"),
    Param("stream_interval", "int", 1, 16, log=True, bounds=(1, 2**16), opt_in=True,
          help="tokens buffered before a streamed chunk is sent",
          why="fewer, larger chunks cut host work but make ITL a per-chunk figure: tuned "
              "only when no objective or SLO is an ITL"),
    Param("max_cudagraph_capture_size", "choice", choices=(64, 128, 256, 512, 1024),
          bounds=(1, 2**16), opt_in=True, help="largest batch replayed from a CUDA graph",
          why="larger batches than this run without a graph; each size captured costs "
              "start time and memory"),
    Param("optimization_level", "choice", choices=(0, 1, 2, 3), bounds=(0, 3), opt_in=True,
          help="-O level: start time against step speed (0: no compile)",
          why="trades torch.compile and graph capture at start for faster steps"),
    Param("performance_mode", "choice", choices=("balanced", "interactivity", "throughput"),
          accepted=("balanced", "interactivity", "throughput"), opt_in=True,
          help="graph sizes and kernels for latency or throughput",
          why="picks CUDA-graph sizes, batching and kernels for small or large batches"),
)

def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# The catalogue: every flag the search may tune, with the widest sensible range.
# A study narrows ranges or fixes values; the workload narrows max_model_len.
CATALOGUE: tuple[Param, ...] = (
    Param("max_num_batched_tokens", "int", 128, 65536, log=True, bounds=(1, 2**24),
          help="token budget of one scheduler step"),
    Param("max_model_len", "int", 256, 131072, log=True, bounds=(1, 2**24),
          help="longest input + output a request may have"),
    Param("gpu_memory_utilization", "float", 0.50, 0.95, step=0.01, bounds=(0.01, 1.0),
          help="share of GPU memory vLLM may use; the rest above weights is KV cache"),
    Param("enable_prefix_caching", "bool", help="reuse KV blocks of shared prompt prefixes"),
    Param("enable_chunked_prefill", "bool", help="split prefills and mix them with decodes",
          mode=True),
    Param("enforce_eager", "bool", help="no CUDA graphs: less memory, maybe slower steps"),
    Param("max_num_seqs", "int", 8, 1024, log=True, bounds=(1, 2**16),
          help="most sequences in one step"),
    Param("block_size", "choice", choices=(16, 32, 64), bounds=(1, 1024),
          help="tokens per KV-cache block"),
    Param("kv_cache_dtype", "choice", choices=("auto", "fp8"),
          accepted=("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"),
          help="KV-cache element type"),
    Param("tensor_parallel_size", "choice", choices=(1, 2, 4, 8), bounds=(1, 64),
          help="GPUs one server spans (tuned only when the study has several GPUs)"),
    *V1_SCHEDULER,
)

BY_NAME: dict[str, Param] = {p.name: p for p in CATALOGUE}


def param(name: str) -> Param:
    """The catalogue entry for ``name``; KeyError names the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        known = ", ".join(BY_NAME)
        raise KeyError(f"unknown parameter {name!r}; known: {known}") from None

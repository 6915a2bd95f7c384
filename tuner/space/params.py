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
            return (f"{value!r} is outside {lo:g}..{hi:g}, the values vLLM accepts; "
                    f"give {'an integer' if integral else 'a number'} from {lo:g} to {hi:g}")
        return None

    def argv(self, value: Any) -> list[str]:
        """The command-line words for ``value`` (booleans explicit either way)."""
        if self.kind == "bool":
            return [self.flag] if value else ["--no-" + self.flag[2:]]
        if self.kind == "float":
            return [self.flag, f"{value:g}"]
        return [self.flag, str(value)]


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
    Param("enable_chunked_prefill", "bool", help="split prefills and mix them with decodes"),
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
)

BY_NAME: dict[str, Param] = {p.name: p for p in CATALOGUE}


def param(name: str) -> Param:
    """The catalogue entry for ``name``; KeyError names the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        known = ", ".join(BY_NAME)
        raise KeyError(f"unknown parameter {name!r}; known: {known}") from None

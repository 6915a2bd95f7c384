"""What to send and how: the frozen inputs of a benchmark run.

``WorkloadSpec`` says what the requests look like, ``LoadSpec`` how they arrive, ``SLO`` what
counts as a good request. All three are validated here, at the edge; the rest of the package
trusts them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, TypeVar

from tuner.errors import UsageError

WORKLOAD_KINDS = ("random", "shared-prefix", "multi-turn", "sharegpt")
ENDPOINTS = ("completions", "chat", "generate")
# The study file's names for the load generator's kinds ([workload] kind = "chat").
STUDY_KINDS = {"chat": "multi-turn"}
# Token ids are drawn below this when the model folder gives no vocabulary (Llama 2's size:
# every served model has at least as many ids).
DEFAULT_VOCAB_SIZE = 32000

T = TypeVar("T")


def taking(cls: type[T], *sources: Any, **overrides: Any) -> T:
    """A ``cls`` dataclass whose fields come from the first source with an attribute of the
    same name (the study file's sections), then ``overrides``; the others keep their
    defaults. The fields are declared once, in ``cls``; nothing copies them by hand."""
    values = {}
    for f in dataclasses.fields(cls):
        source = next((s for s in sources if f.name in _names(s)), None)
        if source is not None:
            values[f.name] = getattr(source, f.name)
    return cls(**{**values, **overrides})


def _names(source: Any) -> set[str]:
    fields = getattr(type(source), "model_fields", None)  # a pydantic model
    if fields is not None:
        return set(fields)
    return {f.name for f in dataclasses.fields(source)}


@dataclass(frozen=True)
class WorkloadSpec:
    """The requests of a run; the same spec and seed always give the same requests.

    kind: ``random`` (input/output lengths drawn from ``[L*(1-r), L*(1+r)]`` as vLLM's random
    dataset), ``shared-prefix`` (``num_prefixes`` prefixes of ``prefix_len`` tokens, each
    request one of them plus a unique suffix of about ``input_len`` tokens), ``multi-turn``
    (conversations of ``turns`` turns, each turn sends the whole history), ``sharegpt`` (a
    ShareGPT-format JSON file at ``dataset``; ``output_len`` 0 takes the reply's length).
    Prompts are token ids drawn from ``[min_token_id, vocab_size)``.
    """

    kind: str = "random"
    input_len: int = 1024
    output_len: int = 128
    range_ratio: float = 0.0
    num_prefixes: int = 0
    prefix_len: int = 0
    turns: int = 1
    dataset: str | None = None
    vocab_size: int = DEFAULT_VOCAB_SIZE
    seed: int = 0
    min_token_id: int = 100
    conversations: int = 32

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", STUDY_KINDS.get(self.kind, self.kind))
        if self.kind not in WORKLOAD_KINDS:
            raise UsageError(f"workload kind {self.kind!r} unknown: use one of {WORKLOAD_KINDS}")
        if not 0.0 <= self.range_ratio < 1.0:
            raise UsageError(f"range_ratio {self.range_ratio} must be in [0, 1)")
        if self.input_len < 1 and self.kind != "sharegpt":
            raise UsageError(f"input_len {self.input_len} must be at least 1")
        if self.output_len < 1 and self.kind != "sharegpt":
            raise UsageError(f"output_len {self.output_len} must be at least 1")
        if not 0 <= self.min_token_id < self.vocab_size:
            raise UsageError(
                f"token ids are drawn from [{self.min_token_id}, {self.vocab_size}): "
                "set vocab_size above min_token_id (vocab_size is the model's vocabulary)"
            )
        if self.kind == "shared-prefix" and (self.num_prefixes < 1 or self.prefix_len < 1):
            raise UsageError("shared-prefix needs num_prefixes >= 1 and prefix_len >= 1")
        if self.kind == "multi-turn" and (self.turns < 1 or self.conversations < 1):
            raise UsageError("multi-turn needs turns >= 1 and conversations >= 1")
        if self.kind == "sharegpt" and not self.dataset:
            raise UsageError("sharegpt needs dataset=PATH to a ShareGPT-format JSON file")


@dataclass(frozen=True)
class LoadSpec:
    """How requests arrive and when the run ends.

    ``request_rate`` inf sends as fast as ``max_concurrency`` allows (closed loop); a finite
    rate draws gaps from a gamma distribution of shape ``burstiness`` (1 = Poisson), as vLLM.
    The run ends after ``num_requests`` or, when ``duration_s`` is set, when no new request
    may start (requests in flight finish and count). ``warmup_requests`` are sent first and
    not counted. A run whose client lag p99 exceeds ``max_client_lag_ms`` is marked invalid;
    one that saw less than ``min_gap_share`` of the inter-token gaps cannot tell an ITL (see
    ``gaps``).
    ``http_client`` "fast" (``http1``, the default) or "aiohttp" carries the requests; both
    feed the same streaming loop. ``text_prompts`` sends completions prompts as words instead
    of token ids (for servers that take no ids; the input length becomes approximate).
    With ``early_stop`` (closed loop, one client process) the run stops sending once the
    steady window's intervals for output throughput and p99 ITL (``itl_metric``: "itl" or
    "itl_per_token") are within ``throughput_ci`` and ``itl_ci`` (relative half-widths), and
    otherwise at ``max_requests`` (default: 4 x ``num_requests``); see ``window``.
    """

    max_concurrency: int | None = 256
    request_rate: float = math.inf
    burstiness: float = 1.0
    num_requests: int = 1000
    duration_s: float | None = None
    warmup_requests: int = 16
    endpoint: str = "completions"
    ignore_eos: bool = True
    client_processes: int = 1
    max_client_lag_ms: float = 5.0
    min_gap_share: float = 0.9
    request_timeout_s: float = 6 * 3600.0
    metrics_poll_s: float = 0.5
    http_client: str = "fast"
    text_prompts: bool = False
    early_stop: bool = False
    throughput_ci: float = 0.02
    itl_ci: float = 0.10
    max_requests: int | None = None
    itl_metric: str = "itl"

    @property
    def closed_loop(self) -> bool:
        return self.max_concurrency is not None and math.isinf(self.request_rate)

    @property
    def request_cap(self) -> int:
        """Requests the run may send: ``num_requests``, or the early stop's cap."""
        return (self.max_requests or 4 * self.num_requests) if self.early_stop else (
            self.num_requests)

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINTS:
            raise UsageError(f"endpoint {self.endpoint!r} unknown: use one of {ENDPOINTS}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise UsageError("max_concurrency must be at least 1 (or None for no limit)")
        if not self.request_rate > 0:
            raise UsageError(f"request_rate {self.request_rate} must be > 0 (inf: no pacing)")
        if not self.burstiness > 0:
            raise UsageError(f"burstiness {self.burstiness} must be > 0")
        if self.duration_s is None and self.num_requests < 1:
            raise UsageError("num_requests must be at least 1 (or give duration_s)")
        if self.duration_s is not None and not self.duration_s > 0:
            raise UsageError(f"duration_s {self.duration_s} must be > 0")
        if self.duration_s is not None and math.isinf(self.request_rate) and not self.max_concurrency:
            raise UsageError("a duration with no request rate needs max_concurrency")
        if self.http_client not in ("fast", "aiohttp"):
            raise UsageError(f"http_client {self.http_client!r} unknown: use fast or aiohttp")
        if not 0.0 <= self.min_gap_share <= 1.0:
            raise UsageError(f"min_gap_share {self.min_gap_share} must be in [0, 1]")
        if self.early_stop and not (self.closed_loop and self.duration_s is None
                                    and self.client_processes == 1):
            raise UsageError("early_stop needs a closed loop (max_concurrency, no request "
                             "rate, no duration) and client_processes = 1")
        if not (self.throughput_ci > 0 and self.itl_ci > 0):
            raise UsageError("throughput_ci and itl_ci must be > 0 (relative half-widths)")
        if self.itl_metric not in ("itl", "itl_per_token"):
            raise UsageError(f"itl_metric {self.itl_metric!r} unknown: itl or itl_per_token")
        if self.warmup_requests < 0 or self.client_processes < 1:
            raise UsageError("warmup_requests must be >= 0 and client_processes >= 1")


@dataclass(frozen=True)
class SLO:
    """Service-level objectives, in milliseconds; ``None`` means no objective.

    A request is *good* (counts toward goodput) when its TTFT <= ``ttft_p99_ms``, the p99 of
    its own inter-token latencies <= ``itl_p99_ms``, its TPOT <= ``tpot_ms`` and its E2EL <=
    ``e2el_ms``. The run meets the SLO (metric ``slo_met``) when the run's p99 TTFT and p99 ITL
    are within ``ttft_p99_ms`` and ``itl_p99_ms``.
    """

    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_p99_ms", "itl_p99_ms", "tpot_ms", "e2el_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"SLO {name}={value} must be non-negative")

    @property
    def empty(self) -> bool:
        return all(
            v is None for v in (self.ttft_p99_ms, self.itl_p99_ms, self.tpot_ms, self.e2el_ms)
        )

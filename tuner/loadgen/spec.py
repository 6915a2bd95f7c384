"""What to send and how: the frozen inputs of a benchmark run, each field declared once.

``Requests`` says what the requests look like and ``Arrivals`` how they arrive: the fields a
study file's ``[workload]`` section and a ``tuner bench`` command share. ``Workload`` is both
at once, as a study file writes them and the simulator reads them; ``WorkloadSpec`` and
``LoadSpec`` add what only a load generator's run needs. ``SLO`` says what counts as a good
request. All are validated here, at the edge; the rest of the package trusts them. Built
directly, a bad value is a ``UsageError``; inside a study file, a pydantic ``ValidationError``
that names the key (``tuner.storage.load``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from tuner.errors import UsageError
from tuner.limits import (MAX_CLIENT_PROCESSES, MAX_CONCURRENCY, MAX_DURATION_MS, MAX_DURATION_S,
                          MAX_RELATIVE, MAX_REQUEST_RATE, MAX_REQUESTS, MAX_SEED, MAX_SPEEDUP,
                          MAX_TOKENS, MAX_TURNS, MAX_VOCAB)
from tuner.slo import Slo

WORKLOAD_KINDS = ("random", "shared-prefix", "multi-turn", "sharegpt", "trace")
ENDPOINTS = ("completions", "chat", "generate")
# A study file's older name for multi-turn ([workload] kind = "chat"), still read.
STUDY_KINDS = {"chat": "multi-turn"}
# Token ids are drawn below this when the model folder gives no vocabulary (Llama 2's size:
# every served model has at least as many ids).
DEFAULT_VOCAB_SIZE = 32000


class _Spec(BaseModel):
    # A float is finite unless its field says otherwise (request_rate, burstiness).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


M = TypeVar("M", bound=BaseModel)


def build(cls: type[M], **data: Any) -> M:
    """``cls(**data)``, a bad value a ``UsageError`` naming the field (for values from a
    command line; a study file's are checked with their key by ``tuner.storage.load``)."""
    try:
        return cls(**data)
    except ValidationError as e:
        raise UsageError(_one_line(e)) from None


class _Direct:
    """A load generator's own spec, built directly: a bad value is a ``UsageError``. (Not
    on the study file's sections: pydantic calls a model's own ``__init__`` for a nested
    section too, and the study's error would lose its key.)"""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)  # type: ignore[call-arg]
        except ValidationError as e:
            raise UsageError(_one_line(e)) from None


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    msg = error_text(first)
    return f"{key}: {msg}" if key else msg


# Pydantic's error types for a number out of bounds (their message gives the bound only).
_BOUNDS = ("finite_number", "greater_than", "greater_than_equal", "less_than", "less_than_equal")


def error_text(error: Any) -> str:
    """One pydantic error's message, with the number a bound refused (inf, nan, 10**12)."""
    msg = error["msg"].removeprefix("Value error, ")
    if error["type"] in _BOUNDS and isinstance(error.get("input"), (int, float)):
        msg += f", not {error['input']!r}"
    return msg


class Requests(_Spec):
    """The requests of a run; the same fields and seed always give the same requests.

    kind: ``random`` (input/output lengths drawn from ``[L*(1-r), L*(1+r)]`` as vLLM's random
    dataset), ``shared-prefix`` (``num_prefixes`` prefixes of ``prefix_len`` tokens, each
    request one of them plus a unique suffix of about ``input_len`` tokens), ``multi-turn``
    (a study file may say ``chat``: conversations of ``turns`` turns, each turn sends the
    whole history), ``sharegpt`` (a ShareGPT-format JSON file at ``dataset``; ``output_len``
    0 takes the reply's length), ``trace`` (the requests of the trace file at ``trace``, a
    Mooncake JSONL or Azure CSV file, in its order and lengths: ``tuner.loadgen.replay``;
    the length fields are not used). ``trace_sha256``, the digest of the trace's bytes, is
    set when the study is created (``tuner.storage.load``; a study file may give it to pin
    the file); every later read of the trace refuses a file with another digest.
    """

    kind: Literal["random", "shared-prefix", "multi-turn", "sharegpt", "trace"] = "random"
    input_len: int = Field(1024, ge=1, le=MAX_TOKENS)
    output_len: int = Field(128, ge=0, le=MAX_TOKENS)
    range_ratio: float = Field(0.0, ge=0.0, lt=1.0)
    num_prefixes: int = Field(0, ge=0, le=MAX_REQUESTS)
    prefix_len: int = Field(0, ge=0, le=MAX_TOKENS)
    turns: int = Field(1, ge=1, le=MAX_TURNS)
    dataset: str | None = None
    trace: str | None = None
    trace_sha256: str | None = Field(None, pattern="^[0-9a-f]{64}$")
    seed: int = Field(0, ge=0, le=MAX_SEED)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        v = STUDY_KINDS.get(v, v) if isinstance(v, str) else v
        if v not in WORKLOAD_KINDS:
            raise ValueError(f"workload kind {v!r} unknown: use one of random, "
                             "shared-prefix, multi-turn (or chat), sharegpt, trace")
        return v

    @model_validator(mode="after")
    def _requests(self) -> "Requests":
        if self.output_len < 1 and self.kind != "sharegpt":
            raise ValueError(f"output_len {self.output_len} must be at least 1 "
                             "(0 only for sharegpt: the reply's length)")
        if self.kind == "shared-prefix" and (self.num_prefixes < 1 or self.prefix_len < 1):
            raise ValueError("kind 'shared-prefix' needs num_prefixes >= 1 and prefix_len >= 1")
        if self.kind == "sharegpt" and not self.dataset:
            raise ValueError("kind 'sharegpt' needs 'dataset' (a ShareGPT JSON file)")
        if (self.kind == "trace") != bool(self.trace):
            raise ValueError("kind 'trace' needs 'trace' (a Mooncake JSONL or Azure CSV "
                             "file), and 'trace' needs kind 'trace'")
        if self.trace_sha256 is not None and not self.trace:
            raise ValueError("trace_sha256 is the digest of a trace: it needs 'trace'")
        return self


class Arrivals(_Spec):
    """How requests arrive: ``request_rate`` inf sends as fast as ``max_concurrency``
    allows (closed loop); a finite rate draws gaps from a gamma distribution of shape
    ``burstiness`` (1 = Poisson), as vLLM. ``num_requests`` are counted after
    ``warmup_requests``, spread over ``client_processes``. A run whose client lagged more
    than ``max_client_lag_ms`` (p99) measured the client, not the server: it is invalid; one
    that saw less than ``min_gap_share`` of the inter-token gaps (tokens batched in one
    message, reads that found several messages) cannot tell an ITL (``gaps``).
    ``client_priority`` "realtime" runs the client's thread on real-time scheduling where
    the OS allows it (root or CAP_SYS_NICE), for a machine whose cores the server and other
    work saturate: a client that waits for a core stamps tokens late (``priority``).
    ``speedup`` (only with a trace workload, which then sets it to 1 unless given) replaces
    the rate: arrivals are the trace's, its offsets divided by the speed-up (``replay``)."""

    endpoint: Literal["completions", "chat", "generate"] = "completions"
    max_concurrency: int | None = Field(256, ge=1, le=MAX_CONCURRENCY)
    request_rate: float = Field(math.inf, gt=0, allow_inf_nan=True)
    burstiness: float = Field(1.0, gt=0, allow_inf_nan=True)  # inf: even gaps
    num_requests: int = Field(1000, ge=0, le=MAX_REQUESTS)
    warmup_requests: int = Field(16, ge=0, le=MAX_REQUESTS)
    max_client_lag_ms: float = Field(5.0, gt=0, le=MAX_DURATION_MS)
    min_gap_share: float = Field(0.9, ge=0.0, le=1.0)
    client_processes: int = Field(1, ge=1, le=MAX_CLIENT_PROCESSES)
    client_priority: Literal["normal", "realtime"] = "normal"
    speedup: float | None = Field(None, gt=0, le=MAX_SPEEDUP)

    @field_validator("request_rate")
    @classmethod
    def _rate(cls, v: float) -> float:
        if math.isfinite(v) and v > MAX_REQUEST_RATE:
            raise ValueError(f"request_rate {v:g} is above {MAX_REQUEST_RATE:g} requests a "
                             "second: give inf (closed loop) or a rate a server can see")
        return v

    @model_validator(mode="after")
    def _paced_once(self) -> "Arrivals":
        if self.speedup is not None and math.isfinite(self.request_rate):
            raise ValueError("a trace replay's arrivals are the trace's: give speedup, not "
                             "request_rate")
        return self

    @property
    def closed_loop(self) -> bool:
        return (self.max_concurrency is not None and math.isinf(self.request_rate)
                and self.speedup is None)


class Stopping(_Spec):
    """When a closed-loop run may stop early (a study file's ``[measurement]``): with
    ``early_stop`` once the steady window's 95 % intervals for output throughput and p99
    ITL are within ``throughput_ci`` and ``itl_ci`` (relative half-widths), else at
    ``max_requests`` (default 4 x ``num_requests``); see ``window``. Without it, after
    ``num_requests``."""

    early_stop: bool = False
    throughput_ci: float = Field(0.02, gt=0, le=MAX_RELATIVE)
    itl_ci: float = Field(0.10, gt=0, le=MAX_RELATIVE)
    max_requests: int | None = Field(None, ge=1, le=MAX_REQUESTS)


class Workload(Arrivals, Requests):  # (in this order, a dump lists Requests first)
    """A whole benchmark as a study file's ``[workload]`` writes it and the simulator
    reads it: a number of requests (no duration), closed loop or at a finite rate."""

    @field_validator("num_requests", "output_len")
    @classmethod
    def _counted(cls, v: int, info: ValidationInfo) -> int:
        # No duration to end a run, and the longest request must be known (no sharegpt
        # reply lengths): both at least 1.
        if v < 1:
            raise ValueError(f"{info.field_name} must be at least 1")
        return v

    @model_validator(mode="before")
    @classmethod
    def _replayed(cls, data: Any) -> Any:
        # A trace replays as recorded unless the file gives a speed-up.
        if isinstance(data, dict) and data.get("kind") == "trace" and "speedup" not in data:
            return {**data, "speedup": 1.0}
        return data

    @model_validator(mode="after")
    def _whole(self) -> "Workload":
        if (self.max_concurrency is None and math.isinf(self.request_rate)
                and self.speedup is None):
            raise ValueError("set max_concurrency (closed loop) or a finite request_rate")
        if (self.kind == "trace") != (self.speedup is not None):
            raise ValueError("speedup replays a trace: it needs kind 'trace'")
        return self

    @property
    def longest_request(self) -> int:
        """Input + output tokens of the longest request (what max_model_len must cover)."""
        scale = 1.0 + self.range_ratio
        prompt = math.ceil(self.input_len * scale) + self.prefix_len
        if self.kind == "multi-turn":
            prompt = prompt * self.turns + math.ceil(self.output_len * scale) * (self.turns - 1)
        return prompt + math.ceil(self.output_len * scale)

    def requests(self, **more: Any) -> "WorkloadSpec":
        """What the load generator sends: these fields, plus ``more`` (the vocabulary)."""
        return WorkloadSpec(**self.model_dump(include=set(Requests.model_fields)), **more)

    def arrivals(self, **more: Any) -> "LoadSpec":
        """How the load generator sends it: these fields, plus ``more`` (its ``Stopping``)."""
        return LoadSpec(**self.model_dump(include=set(Arrivals.model_fields)), **more)


class WorkloadSpec(_Direct, Requests):
    """The load generator's requests: prompts are token ids drawn from
    ``[min_token_id, vocab_size)``; ``conversations`` multi-turn conversations."""

    vocab_size: int = Field(DEFAULT_VOCAB_SIZE, le=MAX_VOCAB)
    min_token_id: int = 100
    conversations: int = Field(32, le=MAX_REQUESTS)

    @model_validator(mode="after")
    def _ids(self) -> "WorkloadSpec":
        if not 0 <= self.min_token_id < self.vocab_size:
            raise ValueError(
                f"token ids are drawn from [{self.min_token_id}, {self.vocab_size}): "
                "set vocab_size above min_token_id (vocab_size is the model's vocabulary)")
        if self.kind == "multi-turn" and self.conversations < 1:
            raise ValueError("multi-turn needs turns >= 1 and conversations >= 1")
        return self


class LoadSpec(_Direct, Stopping, Arrivals):
    """How requests arrive and when the run ends.

    The run ends after ``num_requests`` or, when ``duration_s`` is set, when no new request
    may start (requests in flight finish and count).
    ``http_client`` "fast" (``http1``, the default) or "aiohttp" carries the requests; both
    feed the same streaming loop. ``text_prompts`` sends completions prompts as words instead
    of token ids (for servers that take no ids; the input length becomes approximate).
    ``early_stop`` needs a closed loop and one client process; ``itl_metric`` ("itl" or
    "itl_per_token") is the ITL whose interval it watches. ``think_time_ms``: in a closed
    loop, how long each client waits after a response ends before it sends its next request
    (0: at once). Below saturation the clients' requests can move in waves, and how fast a
    client sends again decides how those waves fall into the server's steps, hence p99 ITL
    and the TTFT/TPOT split (docs/loadgen.md, "How fast a client sends again"); a load
    generator setting only, not a study file's.
    """

    duration_s: float | None = Field(None, gt=0, le=MAX_DURATION_S)
    ignore_eos: bool = True
    request_timeout_s: float = Field(6 * 3600.0, gt=0, le=MAX_DURATION_S)
    metrics_poll_s: float = Field(0.5, gt=0, le=MAX_DURATION_S)
    http_client: Literal["fast", "aiohttp"] = "fast"
    text_prompts: bool = False
    itl_metric: Literal["itl", "itl_per_token"] = "itl"
    think_time_ms: float = Field(0.0, ge=0, le=MAX_DURATION_MS)

    @property
    def request_cap(self) -> int:
        """Requests the run may send: ``num_requests``, or the early stop's cap."""
        return (self.max_requests or 4 * self.num_requests) if self.early_stop else (
            self.num_requests)

    @model_validator(mode="after")
    def _run(self) -> "LoadSpec":
        if self.duration_s is None and self.num_requests < 1:
            raise ValueError("num_requests must be at least 1 (or give duration_s)")
        if self.duration_s is not None and math.isinf(self.request_rate) and not self.max_concurrency:
            raise ValueError("a duration with no request rate needs max_concurrency")
        if (self.duration_s is not None and math.isfinite(self.request_rate)
                and self.duration_s * self.request_rate > MAX_REQUESTS):  # paced: built first
            raise ValueError(f"duration_s x request_rate asks for more than {MAX_REQUESTS} "
                             "requests, each scheduled before the run")
        if self.early_stop and not (self.closed_loop and self.duration_s is None
                                    and self.client_processes == 1):
            raise ValueError("early_stop needs a closed loop (max_concurrency, no request "
                             "rate, no duration) and client_processes = 1")
        if self.think_time_ms and not self.closed_loop:
            raise ValueError("think_time_ms needs a closed loop (max_concurrency, no request "
                             "rate): paced arrivals send at their own times")
        return self


@dataclass(frozen=True)
class SLO:
    """Service-level objectives, in milliseconds; ``None`` means no objective.

    A request is *good* (counts toward goodput) when its TTFT <= ``ttft_p99_ms``, its TPOT
    <= ``tpot_ms`` and its E2EL <= ``e2el_ms``, as ``vllm bench serve --goodput`` counts.
    The run meets the SLO (metric ``slo_met``) when the run's p99 TTFT, ITL, TPOT and E2EL
    are within them; a ladder's level is judged by ``judged()``'s verdict.
    """

    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_p99_ms", "itl_p99_ms", "tpot_ms", "e2el_ms"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= MAX_DURATION_MS:
                raise UsageError(f"SLO {name}={value} must be a finite, non-negative number "
                                 f"of milliseconds (at most {MAX_DURATION_MS:g})")

    @property
    def empty(self) -> bool:
        return all(
            v is None for v in (self.ttft_p99_ms, self.itl_p99_ms, self.tpot_ms, self.e2el_ms)
        )

    def judged(self, backlog_tolerance: float | None = None) -> Slo:
        """The same limits as the ``tuner.slo.Slo`` whose verdict judges a run's p99s
        (and a backlog within ``backlog_tolerance``; None: not judged)."""
        return Slo.of({"p99_ttft_ms": self.ttft_p99_ms, "p99_itl_ms": self.itl_p99_ms,
                       "p99_tpot_ms": self.tpot_ms, "p99_e2el_ms": self.e2el_ms},
                      backlog_tolerance)

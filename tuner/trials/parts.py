"""The typed parts of a trial record: what the server, the client, the steady window, the
start, a failure, the accuracy guard, ``vllm bench serve`` and each confirmation run said
about one trial.

Each part is a frozen dataclass stored as one JSON object (a user attribute of the trial,
``tuner.trials.record``). ``to_json()`` writes it and ``from_json()`` reads it back, so that
``to_json(from_json(x)) == x`` for every object a tuner ever stored:

- a field holds the value of the key of its name (``_stored`` names the key where it differs,
  as ``Failure.kind`` is stored under ``class``), as stored: an int stays an int;
- a field at None is not written, and a stored null is kept in ``extra`` (never lost);
- keys a part does not know (an older or newer tuner wrote them) are kept in ``extra`` and
  written back after the fields;
- a stored value is of its field's JSON type or the read refuses it: a ``TypeError`` naming
  the part and the key (a number field takes an int or a float, never a bool; an int field
  an int; a mapping field an object; a sequence field a list), and a part may refuse a
  value out of its range with a ``ValueError`` (``Part.check``; ``tuner.trials.curve``),
  so that nothing past the read meets a string where it does arithmetic.

The keys are the ones their writers use (``tuner.loadgen.prometheus``, the load generator's
``_client_view``, ``tuner.loadgen.window``, ``tuner.engine.startlog``,
``tuner.accuracy.guard``, ``tuner.runner.crosscheck``, ``tuner.runner.confirm``); the unit
tests load every committed study's trials with them (tests/unit/test_trials_parts.py).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar

P = TypeVar("P", bound="Part")


def _stored(name: str, read: Callable[[Any], Any] | None = None) -> Any:
    """A field stored under key ``name`` (and read with ``read``), None when absent."""
    return field(default=None, metadata={"json": name, **({"read": read} if read else {})})


def _nested(part: type[Part]) -> Any:
    """A field holding another part (its JSON object)."""
    return field(default=None, metadata={"read": part.from_json})


@dataclass(frozen=True)
class Part:
    """A typed JSON object that keeps what it does not know (see the module docstring)."""

    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True)

    def __bool__(self) -> bool:
        """False when it holds nothing, as an empty JSON object."""
        return bool(self.to_json())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in _own_fields(type(self)):
            value = getattr(self, f.name)
            if value is not None:
                out[f.metadata.get("json", f.name)] = _json(value)
        return {**out, **self.extra}

    @classmethod
    def from_json(cls: type[P], data: Mapping[str, Any]) -> P:
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: a JSON object was expected, not {data!r}")
        by_key = {f.metadata.get("json", f.name): f for f in _own_fields(cls)}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            f = by_key.get(key)
            if f is None or value is None:
                extra[key] = value
            else:
                kwargs[f.name] = typed(cls, key, f.metadata.get("read", _same)(value))
        part = cls(**kwargs, extra=extra)
        part.check()
        return part

    def check(self) -> None:
        """Refuse (``ValueError``) a stored value out of its range; each read calls it.
        Most parts take any value of the field's type; a curve does not."""

    @classmethod
    def of(cls: type[P], value: P | Mapping[str, Any] | None) -> P | None:
        """``value`` as this part: a part as it is, a JSON object read, None as None."""
        return value if value is None or isinstance(value, cls) else cls.from_json(value)


def _own_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.name != "extra")


def _same(value: Any) -> Any:
    return value


def typed(cls: type, key: str, value: Any) -> Any:
    """``value`` when it is of the type of dataclass ``cls``'s field stored under ``key``
    (as read: a nested part built, a list made a tuple), else a ``TypeError``."""
    kinds = _kinds(cls)[key]
    if not any(_is(value, kind) for kind in kinds):
        text = repr(value)
        text = text if len(text) <= 40 else text[:37] + "..."
        raise TypeError(f"{cls.__name__}.{key}: {text} is not "
                        f"{' or '.join(_name(k) for k in kinds)}")
    return value


@functools.cache
def _kinds(cls: type) -> dict[str, tuple[Any, ...]]:
    """Each stored key of ``cls`` -> the types its field may hold (None left out)."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in _own_fields(cls):
        hint = hints[f.name]
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        out[f.metadata.get("json", f.name)] = tuple(
            h for h in (typing.get_args(hint) if union else (hint,)) if h is not type(None))
    return out


def _is(value: Any, kind: Any) -> bool:
    origin = typing.get_origin(kind) or kind
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (Mapping, dict):
        args = typing.get_args(kind)
        return isinstance(value, Mapping) and (
            not args or args[1] is not float or all(_is(v, float) for v in value.values()))
    if origin in (Sequence, list):
        return isinstance(value, (list, tuple))
    return isinstance(value, origin)


def _name(kind: Any) -> str:
    origin = typing.get_origin(kind) or kind
    names = {float: "a number", int: "an integer", bool: "true or false", str: "a string",
             Mapping: "an object", dict: "an object", Sequence: "a list", list: "a list",
             tuple: "a list"}
    return names.get(origin, f"a {getattr(origin, '__name__', origin)}")


def _json(value: Any) -> Any:
    if isinstance(value, Part):
        return value.to_json()
    if isinstance(value, enum.Enum):
        return value.value
    return value


@dataclass(frozen=True)
class ServerView(Part):
    """The server's ``/metrics`` over a run (``tuner.loadgen.prometheus``): counter deltas
    and polled gauges' peaks; a metric the server did not export is None."""

    preemptions: float | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    kv_cache_usage_peak: float | None = None   # a share, 0..1
    running_peak: float | None = None          # requests running at once


@dataclass(frozen=True)
class ClientView(Part):
    """The load generator's own figures: its processes, warm-up, lag and CPU share.
    ``valid`` False: it was the bottleneck (older studies)."""

    processes: int | None = None
    warmup_requests: int | None = None
    warmup_failed: int | None = None
    send_lag_p50_ms: float | None = None
    send_lag_p99_ms: float | None = None
    send_lag_max_ms: float | None = None
    loop_lag_p50_ms: float | None = None
    loop_lag_p99_ms: float | None = None
    loop_lag_max_ms: float | None = None
    cpu_util_max: float | None = None
    chunks: int | None = None                  # streamed messages received
    realtime_processes: int | None = None
    realtime_refused: int | None = None
    valid: bool | None = None


@dataclass(frozen=True)
class Interval(Part):
    """A figure over the steady window with its 95 % half-widths (``tuner.loadgen.window``;
    studies stored before the repeat-run widths lack them)."""

    value: float | None = None
    half_width: float | None = None
    rel: float | None = None
    repeat_half_width: float | None = None
    repeat_rel: float | None = None
    lag1: float | None = None


@dataclass(frozen=True)
class Window(Part):
    """The steady window of a closed-loop run (run clock, seconds) and its figures in
    simulated time; an interval is None when the window had too few batches."""

    start: float | None = None
    end: float | None = None
    requests: int | None = None
    batches: int | None = None
    output_throughput: Interval | None = _nested(Interval)
    p99_itl_ms: Interval | None = _nested(Interval)
    itl_metric: str | None = None              # itl | itl_per_token
    seconds: float | None = None


@dataclass(frozen=True)
class StartPhases(Part):
    """The start as vLLM's log tells it (``tuner.engine.startlog``): seconds per phase, the
    compile cache's ``hit`` | ``miss`` and the compiled token range."""

    weights: float | None = None
    compile: float | None = None
    profile_run: float | None = None
    graph_capture: float | None = None
    init_engine: float | None = None
    api_start: float | None = None
    engine_start: float | None = None
    kv_profile: float | None = None
    warmup: float | None = None
    api_ready: float | None = None
    logged: float | None = None
    compile_cache: str | None = None
    compile_range: str | None = None
    process_start: float | None = None


class FailureKind(str, enum.Enum):
    """Why a trial was not measured; equal to its text."""

    RULES = "rules"                          # the space's rules refused the configuration
    REFUSED = "refused"                      # the launch check refused its command
    PROPOSE = "propose"                      # no proposal could be made
    OOM = "oom"                              # the start: out of memory
    KV_CACHE_TOO_SMALL = "kv-cache-too-small"
    REJECTED_FLAGS = "rejected-flags"        # vLLM refused a flag
    START_TIMEOUT = "start-timeout"
    CRASH = "crash"                          # exited while starting, for another reason
    CRASH_DURING_BENCHMARK = "crash-during-benchmark"
    HANG = "hang"                            # the benchmark gave no result in time
    BENCHMARK_FAILED = "benchmark-failed"    # no request completed, or an objective missing
    INVALID_MEASUREMENT = "invalid-measurement"  # the client, not the server, was measured
    ERROR = "error"                          # the measurement raised: bad input, or a bug
    TRACE = "trace"                          # the trace file gone or changed at bench time

    __str__ = str.__str__
    __format__ = str.__format__


def failure_kind(value: str) -> FailureKind | str:
    """``value`` as a kind; a kind this version does not know stays its text."""
    try:
        return FailureKind(value)
    except ValueError:
        return str(value)


@dataclass(frozen=True)
class Failure(Part):
    """Why a trial was not measured (stored as {class, message, returncode, log_tail, log}):
    ``kind`` is a ``FailureKind``, or the text of one another tuner wrote."""

    kind: FailureKind | str | None = _stored("class", failure_kind)
    message: str | None = None
    returncode: int | None = None
    log_tail: str | None = None
    log: str | None = None


@dataclass(frozen=True)
class Accuracy(Part):
    """The accuracy guard's attribute (``tuner.accuracy.guard``): the ``role`` (reference |
    replay), the figures against the reference trial, the limit and the verdict, or the
    ``error`` that kept a lossy trial from being checked."""

    role: str | None = None
    lossy: Mapping[str, Any] | None = None     # the lossy flags and their values
    reference_trial: int | None = None
    token_agreement: float | None = None
    logprob_diff: float | None = None
    prompts: int | None = None                 # how many prompts were compared
    max_tokens: int | None = None
    diverged: int | None = None
    agreed_tokens: int | None = None
    tokens: int | None = None
    min_token_agreement: float | None = None
    passed: bool | None = None
    error: str | None = None
    caveat: str | None = None


@dataclass(frozen=True)
class VllmBench(Part):
    """``vllm bench serve``'s figures on the trial's server (``tuner.runner.crosscheck``):
    ``figures`` is the free-form part, vLLM's own result keys (its JSON, a number each);
    ``runs`` every run's figures when repeated; ``error`` why the first run failed,
    ``repeat_error`` why a later one did; ``levels`` its open-loop runs beside a load
    ladder, each with its ``request_rate``."""

    figures: Mapping[str, Any] = field(default_factory=dict)
    runs: Sequence[Mapping[str, Any]] | None = None
    error: str | None = None
    repeat_error: str | None = None
    levels: Sequence[Mapping[str, Any]] | None = None

    def get(self, key: str) -> Any:
        """vLLM's figure ``key``, or None."""
        return self.figures.get(key)

    def to_json(self) -> dict[str, Any]:
        named = {k: v for k, v in (("runs", self.runs), ("error", self.error),
                                   ("repeat_error", self.repeat_error),
                                   ("levels", self.levels)) if v is not None}
        return {**self.figures, **named, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VllmBench:
        if not isinstance(data, Mapping):
            raise TypeError(f"VllmBench: a JSON object was expected, not {data!r}")
        named = {"runs", "error", "repeat_error", "levels"}
        return cls(figures={k: v for k, v in data.items() if k not in named},
                   **{k: typed(cls, k, v) for k, v in data.items()
                      if k in named and v is not None},
                   extra={k: v for k, v in data.items() if k in named and v is None})


@dataclass(frozen=True)
class Repeat(Part):
    """One benchmark run among a trial's confirmation runs (``tuner.runner.confirm``): the
    figures it keeps (``confirm.KEPT``) and its steady window (None: not a closed loop)."""

    metrics: Mapping[str, float] | None = None
    window: Window | None = _nested(Window)

"""The trial record: what every trial stores, shared by the runner, the search, the results
and the API.

``TrialRecord`` is one frozen, typed record per trial. Its trial fields (``number``,
``state``, ``values``, ``constraints``, ``trial_id``, ``retry_of``) come from Optuna; every
other field is
one of the trial's user attributes, stored under the field's own name, so each key is
spelled once: here. ``to_user_attrs()`` writes the attributes (JSON-safe, fields at their
default left out) and ``from_user_attrs()`` / ``from_frozen()`` read them back; keys this
version does not know (an older or newer tuner wrote them) are kept in ``extra`` and written
back as they were, and keys an older study lacks read as the field's default, so old
studies still load.

A record is also what the runner tells the study: the builders below (``measured``,
``infeasible``, ``duplicate``, ``failed``, ``stopped``) turn a base record (the proposal's
flags, the worker, the command...) into a told one, and ``dataclasses.replace`` adds
attributes on the way (phases, the cross-check). The outcomes (``Outcome``):

``measured``   the server started and was benchmarked: values from the metrics; constraint
               ``starts`` = 0 and one ``slo:<metric>`` = value - limit per SLO; in a study
               guarded for accuracy (``StudySpec.accuracy_limit``) also
               ``accuracy:token_agreement`` = limit - agreement (lossless trials: limit - 1;
               ``accuracy`` holds the guard's figures, see ``tuner.accuracy.guard``).
``infeasible`` the configuration could not start (the rules, or vLLM refused it, or it ran
               out of memory): told as COMPLETE with ``starts`` = 1, the study's worst
               acceptable values, and ``failure`` (a ``Failure``: kind, message, log tail), so that
               constrained samplers learn the infeasible region.
``duplicate``  its effective flags were already measured: told with that measurement and
               ``duplicate_of`` = the measured trial's number, without a launch.
``failed``     the server crashed or hung during the benchmark: FAIL, with ``failure``.
``stopped``    the user stopped the worker: FAIL with ``stopped`` = true; enqueued again.

The parts that are JSON objects (``server``, ``client``, ``window``, ``start_phases``,
``failure``, ``accuracy``, ``vllm_bench``, ``curve``, each of ``repeats``) are typed
(``tuner.trials.parts``): a record built with a mapping for one reads it as its part, and
each is stored as it was (its ``to_json``).

Adding an attribute is a one-place change: add a field to ``TrialRecord`` with a default
(None, (), {} or False: an old study then reads it as that) and a line in the field list
below. ``to_user_attrs`` / ``from_user_attrs`` go over the fields, so nothing else changes;
a field whose stored form is not plain JSON (a tuple, an int, a typed value) names its
reader in ``_READ``, or is a part (``PARTS``) with a field of its own (``tuner.trials.parts``).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from tuner.errors import BadRecordError
from tuner.numerics import lossy_flags
from tuner.trials.curve import Curve
from tuner.trials.scoring import Scoring
from tuner.trials.parts import (Accuracy, ClientView, Failure, Part, Repeat, ServerView,
                                StartPhases, VllmBench, Window, typed)

if TYPE_CHECKING:  # the builders read a spec; trials/ imports no layer above it
    from tuner.spec.study import StudySpec


class Outcome(str, enum.Enum):
    """What became of a told trial (see the module docstring); equal to its text."""

    MEASURED = "measured"
    INFEASIBLE = "infeasible"
    DUPLICATE = "duplicate"
    FAILED = "failed"
    STOPPED = "stopped"

    __str__ = str.__str__        # its text, as enum.StrEnum does (Python 3.11+)
    __format__ = str.__format__


MEASURED, INFEASIBLE, DUPLICATE, FAILED, STOPPED = tuple(Outcome)
STARTS = "starts"                # the constraint that says a configuration did not start
SLO_PREFIX = "slo:"              # one constraint per SLO: slo:<metric>
ACCURACY = "accuracy:token_agreement"  # the accuracy guard's limit - agreement
DEFAULT_BASELINE = "default"     # the baseline that launches vLLM's defaults
REFERENCE_BASELINE = "reference"  # the default again, on a later worker's host (drift.py)
CAPACITY_RPS = "capacity_rps"    # a load ladder's capacity: its trial's SLO verdict

# Optuna's trial states as the records spell them (``TrialState.name.lower()``).
COMPLETE, FAIL, RUNNING, WAITING = "complete", "fail", "running", "waiting"
TRIAL_FIELDS = ("number", "state", "values", "constraints", "trial_id", "retry_of")


@dataclass(frozen=True)
class Spread:
    """One metric over a trial's repeated runs (confirmation runs): ``rel`` is the range
    relative to the median. A gain smaller than it is within noise."""

    n: int
    median: float
    min: float
    max: float

    @property
    def rel(self) -> float:
        return (self.max - self.min) / abs(self.median) if self.median else 0.0

    def covers(self, gain_pct: float) -> bool:
        """Whether a gain (percent) lies inside this spread (needs two runs or more)."""
        return self.n > 1 and abs(gain_pct) <= 100.0 * self.rel

    def to_json(self) -> dict[str, Any]:
        """Stored with its ``rel`` (for readers of the JSON; ``from_json`` computes it)."""
        return {**dataclasses.asdict(self), "rel": self.rel}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Spread:
        return cls(int(data["n"]), float(data["median"]), float(data["min"]),
                   float(data["max"]))


@dataclass(frozen=True)
class TrialRecord:
    """One trial: Optuna's fields, then its user attributes (all JSON-safe once written)."""

    # Optuna's own fields (not user attributes)
    number: int = -1                        # -1 while the record is being made
    state: str = RUNNING                    # complete | fail | running | waiting | pruned
    values: tuple[float, ...] | None = None
    constraints: Mapping[str, float] = field(default_factory=dict)
    trial_id: int | None = None             # the storage's id (for the dashboard's notes)
    retry_of: int | None = None             # a heartbeat's retry: the closed trial it repeats
    # user attributes
    outcome: Outcome | None = None          # None while not told
    flags: Mapping[str, Any] = field(default_factory=dict)   # effective, every tuned flag
    launch: Mapping[str, Any] = field(default_factory=dict)  # on the command line
    command: tuple[str, ...] = ()           # the full server argv
    baseline: str | None = None             # default | article | article-chunked
    repaired: tuple[str, ...] = ()          # rule ids that moved the proposal
    metrics: Mapping[str, float] = field(default_factory=dict)  # vLLM's metric names
    server: ServerView | None = None        # /metrics deltas and peaks: preemptions, ...
    noise: Mapping[str, float] | None = None    # run-to-run noise per metric (relative)
    client: ClientView | None = None        # the load generator's lag; valid false: it
    #                                         was the bottleneck
    failures: Mapping[str, int] | None = None   # failed requests by reason
    rejected_runs: tuple[str, ...] = ()     # why benchmark runs were repeated
    kv_cache_tokens: int | None = None      # KV-cache size from the startup log
    vllm_version: str | None = None
    gpu_name: str | None = None
    engine: str | None = None               # vllm | sim | ...
    host: str | None = None
    worker: str | None = None
    gpus: tuple[int, ...] = ()
    log: str | None = None                  # the server's log file
    phases: Mapping[str, float] | None = None   # seconds: start, warmup, benchmark, stop...
    start_phases: StartPhases | None = None  # the start from vLLM's log (runner/
    #                     startlog.py): process_start, api_start, engine_start, weights,
    #                     compile (+ compile_cache hit|miss), kv_profile, graph_capture...
    failure: Failure | None = None          # kind, message, log tail when not measured
    duplicate_of: int | None = None         # duplicates: the measured trial's number
    stopped: bool = False                   # stopped trials only
    interrupted: bool = False               # measured, then the worker was interrupted
    recorded_for: int | None = None         # a copy told for a trial closed meanwhile
    vllm_bench: VllmBench | None = None     # `vllm bench serve`'s figures (cross-check)
    # The steady window of the benchmark and its 95 % intervals (tuner/loadgen/window.py),
    # and why the run stopped sending: count | duration | early | cap.
    window: Window | None = None
    stop_reason: str | None = None
    # As vLLM ran (launch flag, else its start log): both change what the client sees.
    async_scheduling: bool | None = None
    stream_interval: int | None = None
    # Confirmation runs (search.confirm; tuner/runner/confirm.py): every run's figures, and
    # per objective the spread over them; the told values are the medians.
    repeats: tuple[Repeat, ...] = ()
    spread: Mapping[str, Spread] = field(default_factory=dict)
    accuracy: Accuracy | None = None        # the accuracy guard: role, figures, verdict
    curve: Curve | None = None              # the load ladder's levels (tuner/trials/curve.py)
    extra: Mapping[str, Any] = field(default_factory=dict)  # attributes this version does
    #                                                         not know, kept as they are

    def __post_init__(self) -> None:
        if self.outcome is not None and not isinstance(self.outcome, Outcome):
            object.__setattr__(self, "outcome", Outcome(self.outcome))
        for name, part in PARTS.items():  # a mapping given (or stored): its part
            object.__setattr__(self, name, part.of(getattr(self, name)))
        object.__setattr__(self, "repeats", tuple(Repeat.of(r) for r in self.repeats))

    @property
    def told(self) -> bool:
        return self.state in (COMPLETE, FAIL)

    @property
    def measured(self) -> bool:
        """Started and benchmarked here (duplicates copy another trial's measurement)."""
        return self.state == COMPLETE and self.outcome == MEASURED and bool(self.metrics)

    @property
    def violation(self) -> float:
        """Sum of the positive constraint values (0 when feasible)."""
        return sum(max(0.0, float(v)) for v in self.constraints.values())

    @property
    def feasible(self) -> bool:
        """Started, every constraint (starts, each SLO) <= 0, and a load ladder's capacity
        above 0 (``capacity_held``)."""
        return bool(self.constraints) and self.violation == 0.0 and self.capacity_held

    @property
    def capacity_held(self) -> bool:
        """False for a load ladder's trial whose capacity is 0 (no level held the SLOs):
        a ladder's SLOs judge its levels, not the saturated run, so its capacity is its
        SLO verdict; True for every other trial."""
        capacity = self.metric(CAPACITY_RPS)
        return capacity is None or capacity > 0

    @property
    def client_valid(self) -> bool:
        """False when the load generator, not the server, was the bottleneck."""
        return self.client is None or self.client.valid is None or bool(self.client.valid)

    def metric(self, name: str) -> float | None:
        value = self.metrics.get(name)
        return None if value is None else float(value)

    def interval_sd_rel(self, name: str) -> float | None:
        """A figure's standard deviation relative to it, read from its 95 % interval
        (``<name>_lower`` / ``<name>_upper`` beside it, as a ladder's capacity has:
        width / 3.92 / value); None without one, or at a value of 0."""
        value, lo, hi = (self.metric(name), self.metric(f"{name}_lower"),
                         self.metric(f"{name}_upper"))
        if value is None or lo is None or hi is None or not value > 0:
            return None
        return (hi - lo) / (2 * 1.96) / value

    @property
    def first_run(self) -> dict[str, float]:
        """The first benchmark run on the trial's server: ``metrics`` (whose objectives are
        medians over the confirmation runs, everything else the first run's) with the first
        repetition's own figures over it."""
        return {**self.metrics, **((self.repeats[0].metrics or {}) if self.repeats else {})}

    @property
    def last_run(self) -> dict[str, float]:
        """The last run on the server, the one right before a cross-check: the last
        repetition's figures (``tuner.runner.confirm.KEPT``; a study stored before TTFT and
        median ITL were kept lacks them), else the first run's when there was one run."""
        return dict(self.repeats[-1].metrics or {}) if len(self.repeats) > 1 else self.first_run

    def to_user_attrs(self) -> dict[str, Any]:
        """The user attributes to store (fields at their default are left out)."""
        out: dict[str, Any] = dict(self.extra)
        for f in _ATTR_FIELDS:
            value = getattr(self, f.name)
            if value != _default(f):
                out[f.name] = _json(value)
        return out

    @classmethod
    def from_user_attrs(cls, attrs: Mapping[str, Any], **trial: Any) -> TrialRecord:
        """The record of stored user attributes (``trial``: number, state, values...). An
        attribute not of its field's type, or out of its range (a part's ``check``), is a
        ``BadRecordError`` naming it; the readers skip that trial (``tuner.trials.queries``)."""
        known = {f.name for f in _ATTR_FIELDS}
        kwargs = {k: _read(k, v) for k, v in attrs.items() if k in known and v is not None}
        extra = {k: v for k, v in attrs.items() if k not in known}
        return cls(**trial, **kwargs, extra=extra)


def _same(value: Any) -> Any:
    return value


def _numbers(value: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a stored map, as stored (an int stays an int: it is written back so)."""
    return {k: v for k, v in (value or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _read(key: str, value: Any) -> Any:
    """The stored attribute ``key`` as its field, or a ``BadRecordError`` naming it."""
    try:
        return typed(TrialRecord, key, _READ.get(key, _same)(value))
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:
        raise BadRecordError(f"attribute {key!r}: {e}") from e


# The attributes stored as a typed part (``tuner.trials.parts``): field -> its part.
PARTS: dict[str, type[Part]] = {
    "server": ServerView, "client": ClientView, "start_phases": StartPhases,
    "failure": Failure, "vllm_bench": VllmBench, "window": Window, "accuracy": Accuracy,
    "curve": Curve,
}

# How a stored attribute becomes its field, where JSON's form is not the field's.
_READ: dict[str, Callable[[Any], Any]] = {
    "outcome": Outcome,
    "flags": dict, "launch": dict,
    "metrics": _numbers,
    "command": lambda v: tuple(str(w) for w in _list(v)),
    "repaired": lambda v: tuple(str(w) for w in _list(v)),
    "rejected_runs": lambda v: tuple(str(w) for w in _list(v)),
    "gpus": lambda v: tuple(int(g) for g in _list(v)),
    "kv_cache_tokens": _int_or_none,
    "stopped": bool, "interrupted": bool,
    "stream_interval": _int_or_none,
    "repeats": lambda v: tuple(Repeat.from_json(r) for r in _list(v)),
    "spread": lambda v: {k: Spread.from_json(s) for k, s in v.items()},
    **{name: part.from_json for name, part in PARTS.items()},
}


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{value!r:.40} is not a list")
    return value

_ATTR_FIELDS = tuple(f for f in dataclasses.fields(TrialRecord)
                     if f.name not in TRIAL_FIELDS and f.name != "extra")


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _json(value: Any) -> Any:
    if isinstance(value, Outcome):
        return value.value
    if isinstance(value, (Part, Spread)):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    return value


# Building the told record -------------------------------------------------------------

def objective_values(spec: StudySpec | Scoring,
                     metrics: Mapping[str, float]) -> tuple[float, ...]:
    return tuple(float(metrics[m]) for m in Scoring.of(spec).metrics)


def slo_constraints(spec: StudySpec | Scoring,
                    metrics: Mapping[str, float] | None) -> dict[str, float]:
    """One constraint per SLO: value - limit (<= 0 is met); 1.0 when nothing was measured."""
    out = {}
    for metric, limit in Scoring.of(spec).slo_limits:
        value = None if metrics is None else metrics.get(metric)
        out[SLO_PREFIX + metric] = 1.0 if value is None else float(value) - limit
    return out


def accuracy_constraint(spec: StudySpec | Scoring,
                        accuracy: Accuracy | Mapping[str, Any] | None,
                        flags: Mapping[str, Any], started: bool = True) -> dict[str, float]:
    """``accuracy:token_agreement`` = limit - agreement (<= 0 is met) in a guarded study:
    a replayed trial's own agreement (none: not checked, 1.0), a lossless one's 1 by its
    class; 1.0 when nothing started, or for lossy ``flags`` nobody checked. Empty for a
    study without a lossy flag."""
    limit, accuracy = Scoring.of(spec).accuracy_limit, Accuracy.of(accuracy)
    if limit is None:
        return {}
    if not started or (not accuracy and lossy_flags(flags)):
        return {ACCURACY: 1.0}
    if not accuracy or accuracy.role != "replay":
        return {ACCURACY: limit - 1.0}
    value = accuracy.token_agreement
    return {ACCURACY: 1.0 if value is None else limit - float(value)}


def with_accuracy(spec: StudySpec | Scoring, told: TrialRecord,
                  accuracy: Accuracy | Mapping[str, Any]) -> TrialRecord:
    """A measured record with the guard's attribute and its constraint."""
    acc = Accuracy.of(accuracy)
    cons = {**told.constraints, **accuracy_constraint(spec, acc, told.flags)}
    return dataclasses.replace(told, accuracy=acc, constraints=cons)


def measured(spec: StudySpec | Scoring, metrics: Mapping[str, float],
             base: TrialRecord) -> TrialRecord:
    """``base`` told as measured: the objectives' values and every constraint."""
    scoring = Scoring.of(spec)
    cons = {STARTS: 0.0, **slo_constraints(scoring, metrics),
            **accuracy_constraint(scoring, base.accuracy, base.flags)}
    return dataclasses.replace(base, state=COMPLETE, values=objective_values(scoring, metrics),
                               constraints=cons, outcome=MEASURED, metrics=dict(metrics))


def infeasible(spec: StudySpec | Scoring, failure: Failure | Mapping[str, Any],
               base: TrialRecord) -> TrialRecord:
    """``base`` told as a configuration that never served: the worst values, every
    constraint violated."""
    scoring = Scoring.of(spec)
    values = tuple(g.worst for g in scoring.goals)
    cons = {STARTS: 1.0, **slo_constraints(scoring, None),
            **accuracy_constraint(scoring, None, base.flags, started=False)}
    return dataclasses.replace(base, state=COMPLETE, values=values, constraints=cons,
                               outcome=INFEASIBLE, failure=Failure.of(failure))


# What a duplicate copies from the trial that measured its flags (unless its own base has it).
DUPLICATED = ("metrics", "server", "kv_cache_tokens", "failure", "accuracy")


def duplicate(of: TrialRecord, base: TrialRecord) -> TrialRecord:
    copied = {k: getattr(of, k) for k in DUPLICATED
              if _empty(getattr(base, k)) and not _empty(getattr(of, k))}
    return dataclasses.replace(base, state=COMPLETE, values=tuple(of.values),
                               constraints=dict(of.constraints), outcome=DUPLICATE,
                               duplicate_of=of.number, **copied)


def _empty(value: Any) -> bool:
    """None, {} or an empty part."""
    return value is None or value == {} or (isinstance(value, Part) and not value)


def failed(failure: Failure | Mapping[str, Any], base: TrialRecord) -> TrialRecord:
    return dataclasses.replace(base, state=FAIL, values=None, constraints={},
                               outcome=FAILED, failure=Failure.of(failure))


def stopped(base: TrialRecord) -> TrialRecord:
    return dataclasses.replace(base, state=FAIL, values=None, constraints={},
                               outcome=STOPPED, stopped=True)


def flags_key(flags: Mapping[str, Any]) -> str:
    """A canonical key of effective flags, to find repeated configurations."""
    return ";".join(f"{k}={flags[k]!r}" for k in sorted(flags))

"""The trial record: what every trial stores, shared by the runner, results and the API.

A trial's user attributes (keys below) hold everything a user needs to trust and reuse
it; its values are the study's objectives; its constraints (``trial.set_constraint``)
tell the sampler what was infeasible. The outcomes:

``measured``   the server started and was benchmarked: values from the metrics; constraint
               ``starts`` = 0 and one ``slo:<metric>`` = value - limit per SLO.
``infeasible`` the configuration could not start (the rules, or vLLM refused it, or it ran
               out of memory): told as COMPLETE with ``starts`` = 1, the study's worst
               acceptable values, and ``failure`` = {class, message, log_tail}, so that
               constrained samplers learn the infeasible region.
``duplicate``  its effective flags were already measured: told with that measurement and
               ``duplicate_of`` = the measured trial's number, without a launch.
``failed``     the server crashed or hung during the benchmark: FAIL, with ``failure``.
``stopped``    the user stopped the worker: FAIL with ``stopped`` = true; enqueued again.

User attributes (all JSON-safe):

    outcome         one of the above
    flags           effective flags, every tuned flag explicit (booleans true/false)
    launch          the flags put on the command line (baselines: exactly as given)
    command         the full server argv (a list)
    baseline        "default" | "article" | "article-chunked" (baselines only)
    repaired        rule ids that moved the proposal (when the rules repaired it)
    metrics         load-generator metrics (vLLM's names: output_throughput, p99_itl_ms...)
    server          /metrics deltas: preemptions, prefix_cache_hits, kv_cache_usage_peak...
    noise           run-to-run noise of the benchmark (relative, per metric)
    client          the load generator's own lag; ``valid`` false when it was the bottleneck
    kv_cache_tokens KV-cache size parsed from the startup log
    vllm_version, gpu_name, engine, host, worker
    phases          seconds per phase: start, warmup, benchmark, stop, overhead
    failure         {"class", "message", "log_tail"} when it did not measure
    duplicate_of    trial number (duplicates only)
    stopped         true (stopped trials only)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tuner.study.spec import StudySpec

MEASURED, INFEASIBLE, DUPLICATE, FAILED, STOPPED = (
    "measured", "infeasible", "duplicate", "failed", "stopped")
STARTS = "starts"
SLO_PREFIX = "slo:"


@dataclass(frozen=True)
class Told:
    """What to tell the study for one trial: state, values, constraints, attributes."""

    state: str  # "complete" | "fail"
    values: tuple[float, ...] | None
    constraints: Mapping[str, float]
    attrs: Mapping[str, Any] = field(default_factory=dict)


def objective_values(spec: StudySpec, metrics: Mapping[str, float]) -> tuple[float, ...]:
    return tuple(float(metrics[o.metric]) for o in spec.objectives)


def slo_constraints(spec: StudySpec, metrics: Mapping[str, float] | None) -> dict[str, float]:
    """One constraint per SLO: value - limit (<= 0 is met); 1.0 when nothing was measured."""
    out = {}
    for metric, limit in spec.slo.limits().items():
        value = None if metrics is None else metrics.get(metric)
        out[SLO_PREFIX + metric] = 1.0 if value is None else float(value) - limit
    return out


def measured(spec: StudySpec, metrics: Mapping[str, float], attrs: Mapping[str, Any]) -> Told:
    cons = {STARTS: 0.0, **slo_constraints(spec, metrics)}
    return Told("complete", objective_values(spec, metrics), cons,
                {**attrs, "outcome": MEASURED, "metrics": dict(metrics)})


def infeasible(spec: StudySpec, failure: Mapping[str, Any], attrs: Mapping[str, Any]) -> Told:
    values = tuple(spec.worst_value(o) for o in spec.objectives)
    cons = {STARTS: 1.0, **slo_constraints(spec, None)}
    return Told("complete", values, cons, {**attrs, "outcome": INFEASIBLE,
                                           "failure": dict(failure)})


def duplicate(of_number: int, of_values: Sequence[float], of_constraints: Mapping[str, float],
              of_attrs: Mapping[str, Any], attrs: Mapping[str, Any]) -> Told:
    copied = {k: of_attrs[k] for k in ("metrics", "server", "kv_cache_tokens", "failure")
              if k in of_attrs}
    return Told("complete", tuple(of_values), dict(of_constraints),
                {**copied, **attrs, "outcome": DUPLICATE, "duplicate_of": of_number})


def failed(failure: Mapping[str, Any], attrs: Mapping[str, Any]) -> Told:
    return Told("fail", None, {}, {**attrs, "outcome": FAILED, "failure": dict(failure)})


def stopped(attrs: Mapping[str, Any]) -> Told:
    return Told("fail", None, {}, {**attrs, "outcome": STOPPED, "stopped": True})


def flags_key(flags: Mapping[str, Any]) -> str:
    """A canonical key of effective flags, to find repeated configurations."""
    return ";".join(f"{k}={flags[k]!r}" for k in sorted(flags))

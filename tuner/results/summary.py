"""A study's results in one frozen object: front, baseline, gains, effects, environment.

``summarise`` is pure over the stored spec, the space and the records (but for one
warning per record it skips: ``tuner.trials.queries.skipped``); the commands, the API,
the report and the dashboard render the same object.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.results.best import launchable
from tuner.results.effects import FlagEffect, flag_effects
from tuner.results.flagdiff import changed_flags
from tuner.results.gains import gains, within_noise
from tuner.space import SearchSpace
from tuner.spec.study import StudySpec
from tuner.trials import (TrialRecord, default_baseline, describe_counts, history,
                          pareto_front, reference_point)
from tuner.trials.pareto import repeats
from tuner.trials.queries import skipped
from tuner.trials.reference import study_rule


@dataclass(frozen=True)
class Row:
    """One trial as a results table shows it."""

    record: TrialRecord
    changed: Mapping[str, Any]           # flags that differ from vLLM's defaults
    gains: Mapping[str, float | None]    # per objective metric, + = better than default
    slos_met: bool                       # a load ladder's: its capacity is above 0
    noise: Mapping[str, bool] = field(default_factory=dict)  # gain inside the runs' spread
    # later measured trials of the same flags (``tuner.trials.pareto.repeats``)
    repeats: tuple[TrialRecord, ...] = ()


@dataclass(frozen=True)
class Summary:
    name: str
    spec: StudySpec
    space: SearchSpace
    records: tuple[TrialRecord, ...]
    front: tuple[Row, ...]
    default: Row | None
    hypervolume: tuple[tuple[int, float], ...]
    reference: tuple[float, ...]
    reference_label: str
    effects: tuple[FlagEffect, ...]
    environment: tuple[tuple[str, str], ...]

    @property
    def counts_line(self) -> str:
        return describe_counts(self.records)


def row(r: TrialRecord, default: TrialRecord | None, spec: StudySpec,
        space: SearchSpace, again: tuple[TrialRecord, ...] = ()) -> Row:
    slo_ok = all(v <= 0 for k, v in r.constraints.items() if k.startswith("slo:"))
    g = gains(r, default, spec.objectives)
    return Row(r, changed_flags(r.flags, space.defaults), g,
               r.measured and slo_ok and r.capacity_held,
               within_noise(r, default, g), again)


def _most_common(values: Sequence[str | None], fallback: str) -> str:
    seen = Counter(v for v in values if v)
    return seen.most_common(1)[0][0] if seen else fallback


def environment(spec: StudySpec, space: SearchSpace,
                records: Sequence[TrialRecord]) -> tuple[tuple[str, str], ...]:
    """What the numbers were measured on, as (label, text) pairs."""
    m, w, hw = spec.model, spec.workload, spec.hardware
    rate = "as fast as possible" if math.isinf(w.request_rate) else f"{w.request_rate:g} req/s"
    workload = (f"{w.kind}, {w.input_len} in / {w.output_len} out, {w.num_requests} requests, "
                f"max concurrency {w.max_concurrency or '-'}, {rate}")
    if w.kind == "shared-prefix":
        workload += f", {w.num_prefixes} prefixes of {w.prefix_len} tokens"
    if w.kind == "trace":
        workload = (f"trace {w.trace} at speed-up {w.speedup:g}, {w.num_requests} requests, "
                    f"max concurrency {w.max_concurrency or '-'}")
    slos = ", ".join(f"{k} <= {v:g}" for k, v in spec.slo.limits().items()) or "none"
    return (
        ("GPU", _most_common([r.gpu_name for r in records], f"{hw.gpu} (from the study file)")),
        ("vLLM version", _most_common([r.vllm_version for r in records], "unknown")),
        ("Engine", spec.engine.kind),
        ("Model", f"{m.path} (served as {m.served_name or m.path}, dtype {m.dtype}, "
                  f"tensor parallel {m.tensor_parallel_size})"),
        ("Workload", workload),
        ("Rule set", f"{space.rules.name}: {space.rules.description}"),
        ("Objectives", ", ".join(f"{o.direction} {o.metric}" for o in spec.objectives)),
        ("SLOs", slos),
        ("Sampler", spec.search.sampler),
        ("Trials", describe_counts(records)),
    )


def summarise(spec: StudySpec, space: SearchSpace, records: Sequence[TrialRecord]) -> Summary:
    """The study's results from the records whose stored flags could be launched
    (``launchable``); each other record is skipped with one warning naming the trial, so
    that no answer (best, capacity, front, report, note) shows its flags."""
    records, refused = launchable(records, space.lossy)
    for r, why in refused:
        skipped(r.trial_id, r.number, spec.name,
                f"its stored flags are not a configuration vLLM accepts ({why})")
    goals = spec.objectives
    default = default_baseline(records)
    ref, ref_label = reference_point(default, goals, study_rule(spec))
    again = repeats([r for r in records if r.measured])
    front = tuple(row(r, default, spec, space, again.get(r.number, ()))
                  for r in pareto_front(records, goals))
    return Summary(
        name=spec.name, spec=spec, space=space, records=records, front=front,
        default=row(default, default, spec, space, again.get(default.number, ()))
        if default else None,
        hypervolume=tuple(history(records, goals, ref)), reference=tuple(ref),
        reference_label=ref_label,
        effects=tuple(flag_effects(records, [p.name for p in space.params], goals)),
        environment=environment(spec, space, records))

"""Plain trial records: what the results need from a stored trial, nothing more.

``TrialRecord`` is built from an Optuna ``FrozenTrial`` once (``from_frozen``); everything
downstream (Pareto, hypervolume, gains, best pick, flag effects) is a pure function over
tuples of records. ``load_records`` is the only storage read: one ``get_trials`` call, no
transaction held, so a study in progress can be read at any time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner import record


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the results see it (see ``tuner.record`` for the attributes)."""

    number: int
    state: str                              # complete | fail | running | waiting | pruned
    outcome: str | None = None              # tuner.record outcome, None while not told
    values: tuple[float, ...] | None = None
    constraints: Mapping[str, float] = field(default_factory=dict)
    flags: Mapping[str, Any] = field(default_factory=dict)
    launch: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    baseline: str | None = None
    duplicate_of: int | None = None
    failure: Mapping[str, Any] | None = None
    vllm_version: str | None = None
    gpu_name: str | None = None
    kv_cache_tokens: int | None = None
    trial_id: int | None = None             # the storage's id (for the dashboard's notes)
    client_valid: bool = True               # False: the load generator was the bottleneck

    @property
    def measured(self) -> bool:
        """Started and benchmarked here (duplicates copy another trial's measurement)."""
        return self.state == "complete" and self.outcome == record.MEASURED and bool(self.metrics)

    @property
    def violation(self) -> float:
        """Sum of the positive constraint values (0 when feasible)."""
        return sum(max(0.0, float(v)) for v in self.constraints.values())

    @property
    def feasible(self) -> bool:
        """Started, and every constraint (starts, each SLO) <= 0."""
        return bool(self.constraints) and self.violation == 0.0

    def metric(self, name: str) -> float | None:
        value = self.metrics.get(name)
        return None if value is None else float(value)


def from_frozen(t: FrozenTrial) -> TrialRecord:
    """The record of a stored trial (pure: reads only the given object)."""
    a = t.user_attrs
    kv = a.get("kv_cache_tokens")
    return TrialRecord(
        number=t.number,
        state=t.state.name.lower(),
        outcome=a.get("outcome"),
        values=tuple(float(v) for v in t.values) if t.values is not None else None,
        constraints=dict(t.constraints or {}),
        flags=dict(a.get("flags") or {}),
        launch=dict(a.get("launch") or {}),
        metrics={k: float(v) for k, v in (a.get("metrics") or {}).items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)},
        command=tuple(str(w) for w in a.get("command") or ()),
        baseline=a.get("baseline"),
        duplicate_of=a.get("duplicate_of"),
        failure=a.get("failure"),
        vllm_version=a.get("vllm_version"),
        gpu_name=a.get("gpu_name"),
        kv_cache_tokens=int(kv) if isinstance(kv, (int, float)) else None,
        trial_id=getattr(t, "_trial_id", None),
        client_valid=bool((a.get("client") or {}).get("valid", True)),
    )


def load_records(study: optuna.Study) -> tuple[TrialRecord, ...]:
    """Every trial of ``study`` (any state), in trial-number order."""
    trials = study.get_trials(deepcopy=False)
    return tuple(sorted((from_frozen(t) for t in trials), key=lambda r: r.number))


def default_baseline(records: Sequence[TrialRecord]) -> TrialRecord | None:
    """The measured trial of vLLM's default configuration, if there is one."""
    return next((r for r in records if r.baseline == "default" and r.measured), None)


def counts(records: Sequence[TrialRecord]) -> dict[str, int]:
    """How many trials per outcome (or per state while not told)."""
    out: dict[str, int] = {}
    for r in records:
        key = r.outcome if r.state in ("complete", "fail") and r.outcome else r.state
        out[key] = out.get(key, 0) + 1
    return out


def describe_counts(records: Sequence[TrialRecord]) -> str:
    """'12 trials: 8 measured, 2 infeasible, ...' for messages."""
    c = counts(records)
    if not c:
        return "no trials"
    parts = ", ".join(f"{v} {k}" for k, v in sorted(c.items(), key=lambda kv: -kv[1]))
    return f"{len(records)} trials: {parts}"

"""What an edited study file changes on a stored study (pure): the keys that differ, and
the first that may not change.

Only the budget may change on a stored study: ``search.n_trials``, ``search.deadline``,
``search.patience`` (and ``description``), and the cross-check beside the measurement
(``engine.crosscheck_trials``, ``engine.crosscheck_repeats``: `vllm bench serve` runs
after a trial's own benchmark and is stored apart; a worker started after the change
reads it). Every other key shapes what a trial measured
or how it was judged: the SLO limits, for one, are told with each trial as constraints
(the sampler and the front read those), and nothing judges stored trials again. Changing
one would mix two studies' trials, so `tuner study create` refuses it and asks for a new
study name instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.spec.study import StudySpec

CHANGEABLE = ("description", "search.n_trials", "search.deadline", "search.patience",
              "engine.crosscheck_trials", "engine.crosscheck_repeats")
SECRET_PREFIX = "engine.env."  # values that may be tokens: named, never printed


@dataclass(frozen=True)
class Change:
    key: str   # dotted, as in the study file: "search.n_trials"
    old: Any   # the stored value (None: not set)
    new: Any   # the file's value

    def __str__(self) -> str:
        return f"{self.key} {self.values('->')}"

    def values(self, between: str) -> str:
        """"OLD BETWEEN NEW"; an environment variable's values are not shown (a token)."""
        if self.key.startswith(SECRET_PREFIX):
            return "(its value differs)"
        return f"{self.old!r} {between} {self.new!r}"


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict) or not data:
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def changes(stored: StudySpec, edited: StudySpec) -> list[Change]:
    """Every key whose value differs, in the study file's order of sections."""
    old, new = _flat(stored.model_dump(mode="json")), _flat(edited.model_dump(mode="json"))
    keys = [*new, *(k for k in old if k not in new)]
    return [Change(k, old.get(k), new.get(k)) for k in keys if old.get(k) != new.get(k)]


def first_refused(found: list[Change]) -> Change | None:
    """The first change that may not be made to a stored study, or None."""
    return next((c for c in found if c.key not in CHANGEABLE), None)

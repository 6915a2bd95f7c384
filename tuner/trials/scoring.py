"""How a trial's measurement becomes what the study is told: the objectives, the SLO
limits, the values a configuration that never started is told, and the accuracy guard's
floor. Compiled once from the study spec (``Scoring.of``) so that the record's builders
and the runner read four fields, not the whole study. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # trials/ imports no layer above it; ``of`` reads a spec's fields
    from tuner.spec.study import StudySpec

Direction = Literal["maximize", "minimize"]


@dataclass(frozen=True)
class Goal:
    """One objective: a metric, its direction, and what a start that failed is told."""

    metric: str
    direction: Direction
    worst: float


@dataclass(frozen=True)
class Scoring:
    """The objectives in the study's order, the SLO upper limits by metric, and the
    accuracy floor (None: a lossless study, nothing to guard)."""

    goals: tuple[Goal, ...]
    slo_limits: tuple[tuple[str, float], ...] = ()
    accuracy_limit: float | None = None

    @classmethod
    def of(cls, spec: StudySpec | Scoring) -> Scoring:
        """The study's scoring; a ``Scoring`` is returned as it is."""
        if isinstance(spec, Scoring):
            return spec
        goals = tuple(Goal(o.metric, o.direction, spec.worst_value(o))
                      for o in spec.objectives)
        # With a load ladder the SLOs define the capacity (each level holds them or not);
        # as constraints on the saturated run they would fail every trial.
        limits = () if spec.measures_capacity else tuple(spec.slo.limits().items())
        return cls(goals, limits, spec.accuracy_limit)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The objectives' metrics, in order."""
        return tuple(g.metric for g in self.goals)

    def told(self) -> tuple[str, ...]:
        """Every metric a trial tells: the objectives, then the SLOs' metrics."""
        return self.metrics + tuple(m for m, _ in self.slo_limits)

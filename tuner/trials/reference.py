"""The score's reference point: the corner of the trade-off a study's SLOs allow (pure).

One definition, used by the search benchmark, ``tuner status``, the stopping rule
(``search.patience``), the report, the dashboard's hypervolume plot and the default
sampler. Per objective:

- a **minimised** metric (p99 ITL): the study's SLO limit on it (``[slo] p99_itl_ms``),
  else ``LATENCY_MULTIPLE`` times the default baseline's value;
- a **maximised** metric (output tokens/s): the study's floor (``[slo]
  min_output_throughput``), else ``FLOOR_SHARE`` of the default baseline's value;
- without a measured default (and no bound): the study's worst acceptable value.

So the whole front inside the SLOs counts, both ends of it: a configuration with half the
default's p99 ITL at 90% of its throughput adds volume, as does one with more throughput
at a higher (still acceptable) latency. The "gain over the default" columns of the report
answer the other question (what beats vLLM's defaults on both).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LATENCY_MULTIPLE = 2.0  # a minimised metric without an SLO: twice the default's value
FLOOR_SHARE = 0.5  # a maximised metric without a floor: half the default's value


@dataclass(frozen=True)
class Bound:
    """One objective's side of the reference: its direction, the study's bound on it
    (SLO limit or floor; None without), the value when nothing is known."""

    direction: str
    bound: float | None
    worst: float

    def value(self, default: float | None) -> float:
        if self.bound is not None:
            return self.bound
        if default is None:
            return self.worst
        return default * (FLOOR_SHARE if self.direction == "maximize" else LATENCY_MULTIPLE)


@dataclass(frozen=True)
class ReferenceRule:
    """How a study turns its default's values into the reference point (``point``)."""

    bounds: tuple[Bound, ...]

    def point(self, default: Sequence[float] | None) -> tuple[float, ...]:
        """The reference in the objectives' own units and directions."""
        return tuple(b.value(None if default is None else d)
                     for b, d in zip(self.bounds, default or [None] * len(self.bounds)))

    def label(self, default_number: int | None) -> str:
        parts = []
        for b in self.bounds:
            if b.bound is not None:
                parts.append("the study's " + ("floor" if b.direction == "maximize"
                                               else "SLO limit"))
            elif default_number is None:
                parts.append("the worst acceptable value")
            elif b.direction == "maximize":
                parts.append(f"{FLOOR_SHARE:g} x the default (trial {default_number})")
            else:
                parts.append(f"{LATENCY_MULTIPLE:g} x the default (trial {default_number})")
        return "; ".join(parts)


def rule_for(objectives: Sequence, limits: Mapping[str, float],
             floors: Mapping[str, float], worst: Sequence[float]) -> ReferenceRule:
    """``objectives``: (metric, direction) goals; ``limits``: upper SLO limits by metric;
    ``floors``: lower bounds by metric; ``worst``: each objective's worst value."""
    return ReferenceRule(tuple(
        Bound(g.direction, (floors if g.direction == "maximize" else limits).get(g.metric), w)
        for g, w in zip(objectives, worst)))


def study_rule(spec) -> ReferenceRule:
    """The rule of a study spec (``tuner.spec.StudySpec``)."""
    return rule_for(spec.objectives, spec.slo.limits(), spec.slo.floors(),
                    [spec.worst_value(o) for o in spec.objectives])

"""What the figures show, as plain data (pure); the report (matplotlib) and the dashboard
(plotly) draw the same points."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.results.summary import Summary
from tuner.trials.pareto import vector


@dataclass(frozen=True)
class Point:
    number: int
    x: float              # the second objective (the first when there is only one: trial)
    y: float              # the first objective
    kind: str             # "front" | "feasible" | "missed-slo"
    baseline: str | None


@dataclass(frozen=True)
class ParetoData:
    x_label: str
    y_label: str
    points: tuple[Point, ...]
    x_limit: float | None  # SLO on the x metric, if any
    y_limit: float | None


def _axis_label(metric: str, direction: str) -> str:
    arrow = "higher is better" if direction == "maximize" else "lower is better"
    return f"{metric} ({arrow})"


def pareto_data(s: Summary) -> ParetoData:
    """Measured trials (one per configuration) on the first two objectives, with the SLOs."""
    goals = s.spec.objectives
    front = {r.record.number for r in s.front}
    limits = s.spec.slo.limits()
    points = []
    seen = set()
    for r in s.records:
        vec = vector(r, goals) if r.measured else None
        if vec is None or r.number in seen:
            continue
        seen.add(r.number)
        kind = "front" if r.number in front else "feasible" if r.feasible else "missed-slo"
        x = vec[1] if len(vec) > 1 else float(r.number)
        points.append(Point(r.number, x, vec[0], kind, r.baseline))
    y_goal = goals[0]
    if len(goals) > 1:
        x_label, x_limit = _axis_label(goals[1].metric, goals[1].direction), \
            limits.get(goals[1].metric)
    else:
        x_label, x_limit = "trial", None
    return ParetoData(x_label, _axis_label(y_goal.metric, y_goal.direction), tuple(points),
                      x_limit, limits.get(y_goal.metric))


def labelled(data: ParetoData, most: int = 30) -> list[Point]:
    """The points to write a label beside: all of a small study, else the front and the
    baselines (the others keep their hover text)."""
    if len(data.points) <= most:
        return list(data.points)
    return [p for p in data.points if p.kind == "front" or p.baseline]


def label_of(p: Point) -> str:
    return f"#{p.number}" + (f" {p.baseline}" if p.baseline else "")


def front_line(data: ParetoData) -> list[tuple[float, float]]:
    """The front's points in x order (for a connecting line)."""
    return sorted((p.x, p.y) for p in data.points if p.kind == "front")

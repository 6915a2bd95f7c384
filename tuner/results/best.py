"""The best configuration under limits (pure).

Limits are upper bounds on metrics: the study's SLOs plus those a user adds
(``--max-itl-p99``, ``--max-ttft-p99``). Among measured trials that meet every limit, the
best by the preferred objective wins (ties: the other objective, then the earlier trial).
When none meets them, the closest trial is the one with the smallest total relative
violation: the sum over limits of max(0, value - limit) / limit.

A trial below the study's accuracy limit (``accuracy:token_agreement`` > 0: the guard saw
its lossy flags change the outputs too much, or could not check them) never wins; it
counts as violating that limit by the constraint's value. ``lossless_first`` (a study that
did not opt in to a lossy flag) picks among lossless configurations when one meets the
limits.

Only records whose stored flags pass the check a worker makes of a stored launch
(``launchable``: every name a catalogue flag, every value one vLLM accepts, no lossy value
the study did not opt in to) are picked from: a record rewritten in the database is never
printed as a ready `vllm serve` line.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tuner.numerics import lossy_flags
from tuner.space.check import launch_problem
from tuner.trials import TrialRecord
from tuner.trials.pareto import Goal, unique_configs, vector
from tuner.trials.record import ACCURACY, CAPACITY_RPS

Prefer = Literal["throughput", "latency"]
DEFAULT_METRIC = {"throughput": ("output_throughput", "maximize"),
                  "latency": ("p99_itl_ms", "minimize")}


@dataclass(frozen=True)
class Pick:
    """The winner (None when nothing meets the limits) and, if so, the closest trial."""

    best: TrialRecord | None
    limits: Mapping[str, float]
    metric: str
    direction: str
    closest: TrialRecord | None = None
    excess: Mapping[str, float] = field(default_factory=dict)  # closest's violated limits


def launchable(records: Sequence[TrialRecord], opted_in: Collection[str]
               ) -> tuple[tuple[TrialRecord, ...], tuple[tuple[TrialRecord, str], ...]]:
    """``records`` split into those whose stored flags could be launched
    (``launch_problem``, with the study's lossy opt-ins ``opted_in``) and the others, each
    with the one line of why."""
    kept, refused = [], []
    for r in records:
        problem = launch_problem(r.flags, opted_in)
        if problem is None:
            kept.append(r)
        else:
            refused.append((r, problem))
    return tuple(kept), tuple(refused)


def user_limits(max_itl_p99: float | None = None,
                max_ttft_p99: float | None = None) -> dict[str, float]:
    """The limits a user adds (``--max-itl-p99``, ``--max-ttft-p99``), by metric."""
    return {metric: value for metric, value in (("p99_itl_ms", max_itl_p99),
                                                ("p99_ttft_ms", max_ttft_p99))
            if value is not None}


def saturated_limits(slo: Mapping[str, float], ladder: bool) -> dict[str, float]:
    """The limits a study's SLOs put on a trial's saturated run: none for a study with a
    load ladder, whose SLOs are in its capacity figures already; else the SLOs."""
    return {} if ladder else dict(slo)


def limits_for(slo: Mapping[str, float], max_itl_p99: float | None = None,
               max_ttft_p99: float | None = None) -> dict[str, float]:
    """The study's SLOs tightened by the user's limits (the smaller bound wins)."""
    out = dict(slo)
    for metric, value in user_limits(max_itl_p99, max_ttft_p99).items():
        out[metric] = min(value, out.get(metric, value))
    return out


def looser_than_slo(slo: Mapping[str, float], max_itl_p99: float | None = None,
                    max_ttft_p99: float | None = None) -> list[str]:
    """One phrase per user limit that the study's SLO overrides (the SLO is tighter, and
    ``limits_for`` keeps the smaller bound), so the answer can say so."""
    flags = {"p99_itl_ms": "--max-itl-p99", "p99_ttft_ms": "--max-ttft-p99"}
    return [f"{flags[m]} {v:g} is looser than the study's SLO {m} <= {slo[m]:g}, which "
            "applies" for m, v in user_limits(max_itl_p99, max_ttft_p99).items()
            if m in slo and v > slo[m]]


def preferred(goals: Sequence[Goal], prefer: Prefer) -> tuple[str, str]:
    """(metric, direction) to rank by: the study's first objective of that kind."""
    want = "maximize" if prefer == "throughput" else "minimize"
    for g in goals:
        if g.direction == want:
            return g.metric, g.direction
    return DEFAULT_METRIC[prefer]


def excess(r: TrialRecord, limits: Mapping[str, float]) -> dict[str, float]:
    """Relative excess per violated limit (a missing metric counts as 1.0); a trial below
    the accuracy limit adds ``accuracy:token_agreement`` (limit - agreement), a load
    ladder's trial of capacity 0 ``capacity_rps`` (1.0: the SLOs held at no level)."""
    out = {}
    if float(r.constraints.get(ACCURACY, 0.0)) > 0:
        out[ACCURACY] = float(r.constraints[ACCURACY])
    if not r.capacity_held:  # a ladder's trial that held its SLOs at no level
        out[CAPACITY_RPS] = 1.0
    for metric, limit in limits.items():
        v = r.metric(metric)
        if v is None:
            out[metric] = 1.0
        elif v > limit:
            out[metric] = (v - limit) / limit
    return out


def ruled_out(records: Sequence[TrialRecord], own: Mapping[str, float],
              slo: Mapping[str, float]) -> dict[str, tuple[TrialRecord, ...]]:
    """When nothing meets the limits: the measured trials that meet the user's ``own``
    limits (``--max-itl-p99``...) but miss one of the study's ``slo``, by the SLO that
    rules each out (metric -> trials). Empty when no trial meets the user's limits, so the
    answer can say which SLO, not the user's limit, leaves nothing."""
    out: dict[str, list[TrialRecord]] = {}
    for r in unique_configs([r for r in records if r.measured]):
        if excess(r, own):
            continue
        for metric in excess(r, slo):
            out.setdefault(metric, []).append(r)
    return {k: tuple(v) for k, v in out.items()}


def pick_best(records: Sequence[TrialRecord], goals: Sequence[Goal],
              limits: Mapping[str, float], prefer: Prefer = "throughput",
              lossless_first: bool = False) -> Pick:
    """The best measured trial meeting ``limits``; see the module docstring."""
    metric, direction = preferred(goals, prefer)
    pool = [r for r in unique_configs([r for r in records if r.measured])
            if r.metric(metric) is not None]
    if lossless_first:
        pick = _pick([r for r in pool if not lossy_flags(r.flags)], goals, limits, metric,
                     direction)
        if pick.best is not None:
            return pick
    return _pick(pool, goals, limits, metric, direction)


def _pick(pool: Sequence[TrialRecord], goals: Sequence[Goal], limits: Mapping[str, float],
          metric: str, direction: str) -> Pick:
    meeting = [r for r in pool if not excess(r, limits)]
    if meeting:
        return Pick(min(meeting, key=lambda r: _rank(r, metric, direction, goals)),
                    dict(limits), metric, direction)
    if not pool:
        return Pick(None, dict(limits), metric, direction)
    closest = min(pool, key=lambda r: (sum(excess(r, limits).values()),
                                       _rank(r, metric, direction, goals)))
    return Pick(None, dict(limits), metric, direction, closest, excess(closest, limits))


def _rank(r: TrialRecord, metric: str, direction: str,
          goals: Sequence[Goal]) -> tuple[float, ...]:
    sign = -1.0 if direction == "maximize" else 1.0
    others = vector(r, [g for g in goals if g.metric != metric]) or ()
    rest = tuple(-v if g.direction == "maximize" else v
                 for v, g in zip(others, [g for g in goals if g.metric != metric]))
    return (sign * r.metric(metric), *rest, float(r.number))

"""Answers from the trials' measured latency-vs-load curves, with no new trial (pure).

Every answer judges the levels with the SLO's one verdict (``tuner.slo.Slo.verdict``) at
the asked limits (the study's SLO where a limit is not given: TTFT, ITL, TPOT and E2EL),
and reads each trial's capacity at those limits from the same fit the ladder used
(``tuner.trials.curve.Curve.estimate``), so that an answer at a study's own SLOs is the
trial's ``capacity_rps``, and no answer at any limits says more than the trial's own
curve supports.

``most_capacity``: the trial whose capacity at the limits is the highest, with its
interval and the levels it rests on. ``lowest_latency_at``: among the trials whose
capacity at the limits reaches a rate, the lowest p99 ITL there (interpolated between
the two measured levels around it); the answer is "at the limit" when the rate lies
inside that trial's capacity interval. Neither extrapolates: a rate above a trial's
highest measured level has no answer from that trial.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuner.slo import Capacity, Slo
from tuner.trials import record
from tuner.trials.capacity_view import capacity_text
from tuner.trials.curve import DEFAULT_TOLERANCE, Curve, Level
from tuner.trials.record import TrialRecord


@dataclass(frozen=True)
class CapacityAnswer:
    """``trial`` answers at ``rate`` requests/s, where its judged p99 ITL and TTFT and its
    output throughput read as given (None where the levels lack them); ``levels``: the
    measured offered rates it rests on (one, or the two around the rate); ``estimate``:
    the trial's capacity at the limits, with its interval (None: stored without one)."""

    trial: TrialRecord
    rate: float
    p99_itl_ms: float | None
    p99_ttft_ms: float | None
    output_throughput: float | None
    levels: tuple[float, ...]
    estimate: Capacity | None = None

    @property
    def at_the_limit(self) -> bool:
        """The rate lies above the capacity interval's lower end: the trial carries it by
        its fit, but not with confidence."""
        est = self.estimate
        return est is not None and est.lower is not None and self.rate > est.lower


def slo_at(limits: Mapping[str, float | None], tolerance: float | None) -> Slo:
    """The SLO the answers judge with: ``limits`` (figure -> ms; None left out)."""
    return Slo.of(limits, DEFAULT_TOLERANCE if tolerance is None else tolerance)


def _usable(level: Level) -> bool:
    return (level.usable and not level.failed and not level.stopped_early
            and level.judged_p99_itl_ms is not None and level.judged_p99_ttft_ms is not None)


def _candidates(records: Sequence[TrialRecord]) -> list[tuple[TrialRecord, Curve]]:
    """Measured trials with a curve, whose other constraints (accuracy) are met."""
    out = []
    for r in records:
        if r.outcome != record.MEASURED or r.curve is None:
            continue
        if any(v > 0 for k, v in r.constraints.items() if not k.startswith(record.SLO_PREFIX)):
            continue
        out.append((r, r.curve))
    return out


def around(curve: Curve, rate: float) -> tuple[Level, ...]:
    """The usable measured levels at ``rate``, or the two around it; () outside them."""
    levels = [lv for lv in curve.measured if _usable(lv)]
    for lv in levels:
        if lv.offered_rps == rate:
            return (lv,)
    for a, b in zip(levels, levels[1:]):
        if a.offered_rps <= rate <= b.offered_rps:
            return (a, b)
    return ()


def at_rate(curve: Curve, rate: float, estimate: Capacity | None = None
            ) -> CapacityAnswer | None:
    """The curve's judged p99s and throughput at ``rate`` (no trial set), interpolated
    between the usable measured levels around it; None outside them. Between the last
    whole level and one above it that failed requests or stopped early (whose figures
    are a shortened run's), the answer rests on both, and its figures are unknown
    (None)."""
    near = around(curve, rate)
    if not near:
        above = [lv for lv in curve.measured if lv.usable and lv.offered_rps >= rate]
        below = [lv for lv in curve.measured if _usable(lv) and lv.offered_rps <= rate]
        if not above or not below:
            return None
        return CapacityAnswer(TrialRecord(), rate, None, None, None,
                              (below[-1].offered_rps, above[0].offered_rps), estimate)
    clean = Curve(levels=near)
    return CapacityAnswer(TrialRecord(), rate, clean.at("judged_p99_itl_ms", rate),
                          clean.at("judged_p99_ttft_ms", rate),
                          clean.at("output_throughput", rate),
                          tuple(lv.offered_rps for lv in near), estimate)


def capacity_of(curve: Curve, slo: Slo) -> Capacity | None:
    """The curve's capacity at ``slo`` (None with no usable level)."""
    return curve.estimate(slo)


def most_capacity(records: Sequence[TrialRecord], slo: Slo) -> CapacityAnswer | None:
    """The trial with the highest capacity at ``slo`` (ties: more output tokens/s there),
    or None when no trial carries any traffic within it."""
    best = None
    for r, curve in _candidates(records):
        est = capacity_of(curve, slo)
        if est is None or not est.point > 0:
            continue
        found = at_rate(curve, est.point, est)
        if found is None:
            continue
        key = (est.point, found.output_throughput or 0.0)
        if best is None or key > best[0]:
            best = (key, CapacityAnswer(r, est.point, found.p99_itl_ms, found.p99_ttft_ms,
                                        found.output_throughput, found.levels, est))
    return None if best is None else best[1]


def lowest_latency_at(records: Sequence[TrialRecord], rate: float,
                      slo: Slo) -> CapacityAnswer | None:
    """The trial with the lowest p99 ITL at ``rate`` among those whose capacity at ``slo``
    reaches it, or None."""
    best = None
    for r, curve in _candidates(records):
        est = capacity_of(curve, slo)
        if est is None or est.point < rate:
            continue
        found = at_rate(curve, rate, est)
        if found is None or found.p99_itl_ms is None:
            continue
        if best is None or found.p99_itl_ms < best.p99_itl_ms:
            best = CapacityAnswer(r, rate, found.p99_itl_ms, found.p99_ttft_ms,
                                  found.output_throughput, found.levels, est)
    return best


def highest_measured(records: Sequence[TrialRecord]) -> float | None:
    """The highest usable level any trial measured (the edge past which nothing is said)."""
    rates = [lv.offered_rps for _, c in _candidates(records) for lv in c.measured
             if _usable(lv)]
    return max(rates) if rates else None


def capacity_label(trial: TrialRecord) -> str:
    """A trial's told capacity as a report shows it (``capacity_view.capacity_text``:
    "3.61 [3.27-3.95]", censored or "no interval" where so, "-" without a capacity)."""
    return capacity_text(trial)

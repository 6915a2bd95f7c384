"""Answers from the trials' measured latency-vs-load curves, with no new trial (pure).

``most_capacity``: the trial that carries the most requests/s with its p99 ITL and p99
TTFT within the given limits, and the measured level that shows it. ``lowest_latency_at``:
the trial with the lowest p99 ITL at a given request rate (interpolated between the two
measured levels around it), within the same limits there. Neither extrapolates: a rate
above a trial's highest measured level has no answer from that trial, and a level counts
only as it was measured (every request completed, the run valid, not stopped early). A
level's p99s are the ones the ladder judged it on (``Level.judged_p99_itl_ms``: its steady
requests', else the whole run's), so that an answer at a study's own SLOs agrees with its ``capacity_rps``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.trials import record
from tuner.trials.curve import Curve, Level
from tuner.trials.record import TrialRecord


@dataclass(frozen=True)
class CapacityAnswer:
    """``trial`` answers at ``rate`` requests/s, where its p99 ITL and TTFT and output
    throughput read as given; ``levels``: the measured offered rates it rests on (one, or
    the two around an interpolated rate)."""

    trial: TrialRecord
    rate: float
    p99_itl_ms: float
    p99_ttft_ms: float
    output_throughput: float | None
    levels: tuple[float, ...]


def _within(value: float | None, limit: float | None) -> bool:
    return limit is None or (value is not None and value <= limit)


def _usable(level: Level) -> bool:
    return (level.offered_rps is not None and not level.failed and not level.stopped_early
            and level.invalid_reason is None and level.p99_itl_ms is not None
            and level.p99_ttft_ms is not None)


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


def capacity_within(curve: Curve, max_itl_p99: float | None,
                    max_ttft_p99: float | None) -> Level | None:
    """The highest measured level whose p99s are within the limits; None when none is."""
    ok = [lv for lv in curve.measured if _usable(lv)
          and _within(lv.judged_p99_itl_ms, max_itl_p99)
          and _within(lv.judged_p99_ttft_ms, max_ttft_p99)]
    return ok[-1] if ok else None


def most_capacity(records: Sequence[TrialRecord], max_itl_p99: float | None,
                  max_ttft_p99: float | None) -> CapacityAnswer | None:
    """The trial with the highest such level (ties: more output tokens/s), or None."""
    best = None
    for r, curve in _candidates(records):
        level = capacity_within(curve, max_itl_p99, max_ttft_p99)
        if level is None:
            continue
        key = (level.offered_rps, level.output_throughput or 0.0)
        if best is None or key > best[0]:
            best = (key, CapacityAnswer(r, level.offered_rps, level.judged_p99_itl_ms,
                                        level.judged_p99_ttft_ms, level.output_throughput,
                                        (level.offered_rps,)))
    return None if best is None else best[1]


def at_rate(curve: Curve, rate: float) -> CapacityAnswer | None:
    """The curve's p99s and throughput at ``rate`` (no trial set), interpolated between
    the usable measured levels around it; None outside them."""
    levels = [lv for lv in curve.measured if _usable(lv)]
    for a, b in zip(levels, levels[1:] or levels):
        if a.offered_rps <= rate <= b.offered_rps:
            clean = Curve(levels=(a, b) if a is not b else (a,))
            return CapacityAnswer(TrialRecord(), rate, clean.at("judged_p99_itl_ms", rate),
                                  clean.at("judged_p99_ttft_ms", rate),
                                  clean.at("output_throughput", rate),
                                  tuple(sorted({a.offered_rps, b.offered_rps})))
    return None


def lowest_latency_at(records: Sequence[TrialRecord], rate: float,
                      max_itl_p99: float | None = None,
                      max_ttft_p99: float | None = None) -> CapacityAnswer | None:
    """The trial with the lowest p99 ITL at ``rate`` within the limits there, or None."""
    best = None
    for r, curve in _candidates(records):
        answer = at_rate(curve, rate)
        if answer is None or not (_within(answer.p99_itl_ms, max_itl_p99)
                                  and _within(answer.p99_ttft_ms, max_ttft_p99)):
            continue
        if best is None or answer.p99_itl_ms < best.p99_itl_ms:
            best = CapacityAnswer(r, answer.rate, answer.p99_itl_ms, answer.p99_ttft_ms,
                                  answer.output_throughput, answer.levels)
    return best


def highest_measured(records: Sequence[TrialRecord]) -> float | None:
    """The highest usable level any trial measured (the edge past which nothing is said)."""
    rates = [lv.offered_rps for _, c in _candidates(records) for lv in c.measured
             if _usable(lv)]
    return max(rates) if rates else None

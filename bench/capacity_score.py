"""How the capacity benchmark scores a study, and compares two contenders (pure).

A study is the list of its launched trials in order, each with its *true* capacity (req/s,
0 where no rate held the SLOs or it did not start), its true p99 ITL at the reference rate
(None where it did not start) and its GPU-seconds (``start_cost.py``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from tuner.trials.hypervolume import hypervolume

REACH = 0.95  # "an answer": a trial within 95 % of the best known capacity


@dataclass(frozen=True)
class Trial:
    capacity: float  # true req/s at the study's SLOs (0: held at no rate)
    reference_itl: float | None  # true p99 ITL ms at the reference rate (None: not started)
    gpu_s: float  # what it cost


def best_share(trials: Sequence[Trial], best: float) -> float:
    """The best true capacity the study found over ``best`` (the best known); 0 if none."""
    if best <= 0:
        return math.nan
    return max((t.capacity for t in trials), default=0.0) / best


def front_points(trials: Sequence[Trial]) -> list[tuple[float, float]]:
    """The minimised (-capacity, reference p99 ITL) of every trial that held the SLOs."""
    return [(-t.capacity, t.reference_itl) for t in trials
            if t.capacity > 0 and t.reference_itl is not None and math.isfinite(t.reference_itl)]


def front_volume(points: Sequence[tuple[float, float]], reference: tuple[float, float]) -> float:
    """The hypervolume of minimised pairs against ``reference``, from their Pareto front."""
    front, best = [], math.inf
    for p in sorted(set(points)):
        if p[1] < best and p[0] < reference[0] and p[1] < reference[1]:
            front.append(p)
            best = p[1]
    return hypervolume(front, reference) if front else 0.0


def hv_share(trials: Sequence[Trial], best_volume: float, reference: tuple[float, float]) -> float:
    """The study's capacity-front hypervolume over the best known front's."""
    if best_volume <= 0:
        return math.nan
    return front_volume(front_points(trials), reference) / best_volume


def gpu_seconds_to(trials: Sequence[Trial], best: float, reach: float = REACH) -> float:
    """GPU-seconds spent up to and including the first trial whose capacity reaches
    ``reach`` x ``best``; inf when none does."""
    spent = 0.0
    for t in trials:
        spent += t.gpu_s
        if best > 0 and t.capacity >= reach * best:
            return spent
    return math.inf


@dataclass(frozen=True)
class Paired:
    """A paired comparison over seeds: a's score minus b's."""

    n: int  # seeds with both
    median_diff: float
    wins: int  # seeds where a > b
    losses: int
    p: float  # two-sided Wilcoxon signed-rank; 1.0 when every difference is 0


def paired_test(a: Sequence[float], b: Sequence[float]) -> Paired:
    """Wilcoxon signed-rank test (scipy.stats.wilcoxon, zero differences dropped) on the
    seed-by-seed pairs of ``a`` and ``b``; pairs with a NaN are left out."""
    from scipy.stats import wilcoxon

    pairs = [(x, y) for x, y in zip(a, b) if not (math.isnan(x) or math.isnan(y))]
    diffs = [0.0 if x == y else x - y for x, y in pairs]  # inf and inf: a tie
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    med = median(diffs)
    if wins + losses == 0:
        return Paired(len(pairs), med, 0, 0, 1.0)
    finite = [d for d in diffs if math.isfinite(d)]
    if len(finite) < len(diffs):  # inf (never reached): ranks only, as signs of order
        big = 2 * max((abs(d) for d in finite), default=1.0) + 1.0
        diffs = [d if math.isfinite(d) else math.copysign(big, d) for d in diffs]
    return Paired(len(pairs), med, wins, losses, float(wilcoxon(diffs).pvalue))


def median(xs: Sequence[float]) -> float:
    """The median of the values that are not NaN (inf counts as the largest); NaN if none."""
    s = [x for x in xs if not math.isnan(x)]
    return statistics.median(s) if s else math.nan


def quartiles(xs: Sequence[float]) -> tuple[float, float]:
    """The 25th and 75th percentiles (nearest rank), NaNs left out; inf kept (it sorts last)."""
    s = sorted(x for x in xs if not math.isnan(x))
    if not s:
        return (math.nan, math.nan)
    pick = lambda q: s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]  # noqa: E731
    return pick(0.25), pick(0.75)

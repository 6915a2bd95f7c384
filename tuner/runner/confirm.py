"""Confirmation runs: the same configuration benchmarked again on the same server (pure).

With ``search.confirm = N`` the default baseline and every trial whose first run lands on the
study's front are benchmarked N more times before the server stops. The trial keeps every
repetition (``repeats``: each run's objective, steady-window, TTFT and ITL figures,
``KEPT``) and tells the median of each objective; ``spread`` (``TrialRecord.spread``: metric
-> ``Spread`` with n, median, min, max and rel = (max - min) / median) is the typed summary
that results and samplers read. A gain over the default inside the spread of either is
"within noise".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tuner.trials import pareto
from tuner.trials.pareto import Goal
from tuner.trials.parts import Window
from tuner.trials.record import Spread, TrialRecord

# Per run, what the repetitions keep besides the objectives (small, JSON-safe): the
# objectives a study may tell, and the TTFT / ITL figures that `vllm bench serve` reports,
# so that a cross-check compares vLLM's run with the run right before it on the same server
# (``TrialRecord.last_run``), not with the first. Studies stored before the TTFT / ITL keys
# lack them in every repetition; the first run's are in the told metrics all the same.
KEPT = ("output_throughput", "p99_itl_ms", "p99_itl_per_token_ms", "steady_output_throughput",
        "steady_p99_itl_ms", "steady_p99_itl_per_token_ms", "completed", "duration",
        "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms")


def runs_to_add(first: Sequence[float], violations: Mapping[str, float], default: bool,
                confirm: int, confirm_default: int | None, front: Sequence[TrialRecord],
                goals: Sequence[Goal]) -> int:
    """How many confirmation runs a first valid run earns: ``confirm_default`` (else
    ``confirm``) for the default baseline, which every gain is measured against; none for a
    run that misses an SLO (``violations``: constraint values, > 0 is missed), since it
    cannot join the front the study reports; none for one that a front point dominates;
    else ``confirm``. ``first``: its objective values in ``goals`` order."""
    if default:
        return confirm if confirm_default is None else confirm_default
    if any(v > 0 for v in violations.values()):
        return 0
    beaten = any(pareto.dominates(pareto.vector(r, goals), first, goals) for r in front)
    return 0 if beaten else confirm


def repetition(metrics: Mapping[str, float], objectives: Sequence[str],
               window: Window | Mapping | None) -> dict:
    """One run's record among the repetitions (its window as stored)."""
    kept = {k: float(metrics[k]) for k in (*objectives, *KEPT) if k in metrics}
    return {"metrics": kept, "window": Window.of(window).to_json() if window else None}


def spread(runs: Sequence[Mapping[str, float]], metrics: Sequence[str]) -> dict[str, Spread]:
    """Median and range of each of ``metrics`` over the runs that have it."""
    out = {}
    for name in metrics:
        values = np.asarray([r[name] for r in runs if name in r], dtype=float)
        if values.size:
            out[name] = Spread(int(values.size), float(np.median(values)),
                               float(values.min()), float(values.max()))
    return out


def medians(first: Mapping[str, float], runs: Sequence[Mapping[str, float]],
            metrics: Sequence[str]) -> dict[str, float]:
    """``first`` with each of ``metrics`` replaced by its median over ``runs``."""
    return {**first, **{name: s.median for name, s in spread(runs, metrics).items()}}

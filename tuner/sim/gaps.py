"""The token gaps a client sees, from the steps that made them (pure).

A decoding request's gap between two tokens is the duration of the step that made the
second, in the model's schedule. Measured gaps have a tail the schedule alone does not give,
and its shape depends on the step (the measurements and the fit:
results/h200/simulator-error.md, docs/simulator.md):

- **late gaps**: a share of gaps wait an extra ``U x`` the next step's duration, ``U``
  uniform in [0, 1] (a step that starts late by part of a step): a thin tail of a few
  percent of steps. Eager steps whose GPU waits on Python's dispatch (``launch_bound``)
  jitter far more, so they have a share of their own (``late_gap_share_launch_bound``).
- **doubled gaps**: in a step that completes two or more prompts, a share of the gaps wait
  a whole extra step: a sharp tail at two steps, seen only at budgets large enough for a
  step to complete two prompts. The mechanism is not identified; it is not the front end
  merging two steps into one message (the load generator counts those).

``percentile`` weighs every gap by its tokens and these shares, as if each were a mixture.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LATE_POINTS = 16  # the uniform delay, sampled at this many evenly spaced fractions


@dataclass(frozen=True)
class GapShares:
    """The shares of ``EngineConstants`` (late_gap_share, ...), by step kind."""

    late: float = 0.0
    late_launch_bound: float = 0.0
    doubled_multi_prefill: float = 0.0

    def any(self) -> bool:
        return bool(self.late or self.late_launch_bound or self.doubled_multi_prefill)


def percentile(values: np.ndarray, counts: np.ndarray, following: np.ndarray,
               launch_bound: np.ndarray, multi_prefill: np.ndarray, q: float,
               shares: GapShares) -> float:
    """The ``q``-th percentile (ms) of the client's gaps.

    Per entry: ``values`` (s) the step's duration, ``counts`` its tokens, ``following`` the
    next step's duration, ``launch_bound`` and ``multi_prefill`` (bool) the step's kind."""
    values = np.asarray(values, dtype=float)
    if not len(values):
        return float("nan")
    counts = np.asarray(counts, dtype=float)
    late = np.where(launch_bound, shares.late_launch_bound, shares.late)
    doubled = np.where(multi_prefill, shares.doubled_multi_prefill, 0.0)
    late = np.minimum(late, 1.0 - doubled)
    parts_v = [values, values + following]
    parts_w = [counts * (1.0 - late - doubled), counts * doubled]
    if late.any():
        for k in range(LATE_POINTS):
            parts_v.append(values + following * (k + 0.5) / LATE_POINTS)
            parts_w.append(counts * late / LATE_POINTS)
    both, weights = np.concatenate(parts_v), np.concatenate(parts_w)
    order = np.argsort(both, kind="stable")
    cum = np.cumsum(weights[order])
    i = int(np.searchsorted(cum, cum[-1] * q / 100.0))
    return float(both[order][min(i, len(both) - 1)]) * 1000.0

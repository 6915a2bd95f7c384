"""The token gaps a client sees, from the steps that made them (pure).

A decoding request's gap between two tokens is the duration of the step that made the
second, in the model's schedule. On the H200 (results/h200/simulator-error.md) the measured
gaps have a tail the schedule alone does not give, and its shape depends on the step:

- **late gaps**: a share of gaps wait an extra ``U x`` the next step's duration, ``U``
  uniform in [0, 1] (a step that starts late by part of a step). With compiled CUDA graphs
  at budgets 256-1,699, the p90 ITL is 1.05-1.07 medians and the p99 1.2-1.4: a share of
  about 1-2 %. Eager steps whose GPU waits on Python's dispatch (``launch_bound``) jitter
  far more: p90 1.5, p99 about 2 medians at eager budgets 256 and 512, a share near 20 %.
- **doubled gaps**: in a step that completes two or more prompts, a share of the gaps wait
  a whole extra step. At budgets 2,048-2,896 (the model's steps there complete two prompts
  in 65-75 % of steps) the p99 ITL is two medians while the p90 is 1.06: a sharp tail of
  more than 1 % at two steps, which no budget below 2,048 shows. The mechanism is not
  identified (the load generator counts 0.00-0.04 % multi-token messages there, so it is
  not the front end merging two steps into one message).

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

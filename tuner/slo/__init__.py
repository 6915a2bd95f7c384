"""Service-level objectives: one SLO value, its one verdict on a level, percentiles with
intervals, and the capacity an SLO leaves a server, with its interval (pure).

- ``verdict``: ``Slo`` (every limit a study sets) and ``Slo.verdict`` (margins);
- ``quantile``: a sample's percentile with a confidence interval;
- ``fit``: the capacity from the margins of a ladder's levels.
"""

from tuner.slo.fit import Capacity, Point, capacity
from tuner.slo.quantile import Estimate, percentile_estimate
from tuner.slo.verdict import BACKLOG, FIGURES, Margin, Slo, Verdict, backlog_margin

__all__ = ["BACKLOG", "FIGURES", "Capacity", "Estimate", "Margin", "Point", "Slo", "Verdict",
           "backlog_margin", "capacity", "percentile_estimate"]

"""The columns of a capacity study's tables (pure), shared by `tuner pareto` and the report:
the capacity first, with its interval, the levels it rests on, the p99s at the reference
rate, then the saturated warm-up's figures under the warm-up's name
(``tuner.trials.capacity_view``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from tuner.results.capacity import capacity_label
from tuner.spec.study import StudySpec
from tuner.trials.capacity_view import REFERENCE, WARM_UP, figure, levels_text
from tuner.trials.record import TrialRecord

# (heading, the metric it shows or None, the cell of a record)
Column = tuple[str, str | None, Callable[[TrialRecord], str]]


def capacity_columns(spec: StudySpec) -> list[Column]:
    """The columns in the order shown."""
    rate = spec.capacity.reference_rate
    at = "at the reference rate" if rate is None else f"at {rate:g} req/s"
    cols: list[Column] = [("capacity req/s [95 %]", "capacity_rps", capacity_label),
                          ("on levels req/s", None, levels_text)]
    cols += [(f"{name} {at}", m, partial(figure, metric=m, pattern=p))
             for m, name, p in REFERENCE]
    cols += [(f"warm-up {name}", m, partial(figure, metric=m, pattern=p))
             for m, name, p in WARM_UP]
    return cols

"""Trials: the one typed trial record every layer reads, and the questions asked of it.

    record.TrialRecord      one trial: Optuna's fields and every user attribute, typed
    record.measured(...)    the builders of a told record (infeasible, duplicate, ...)
    queries                 load_records (bad records skipped), counted, best_value, ...
    queued                  a configuration queued to launch as given (baselines, ...)
    pareto, hypervolume     the front and its volume (pure), for the results and the search
    drift                   the default measured again on later hosts (reference runs)

Imports run one way: the runner and the search write and read records, the results and the
service read them; nothing here imports any of those (``tests/unit/test_imports.py``).
"""

from tuner.trials.hypervolume import history, hypervolume, reference_point
from tuner.trials.pareto import Goal, dominates, nondominated, pareto_front
from tuner.trials.queries import (already_measured, best_value, counted, counts,
                                  default_baseline, describe_counts, from_frozen, load_records,
                                  read_records, readable)
from tuner.trials.record import Outcome, Spread, TrialRecord, flags_key

__all__ = [
    "Goal", "Outcome", "Spread", "TrialRecord", "already_measured", "best_value", "counted", "counts",
    "default_baseline", "describe_counts", "dominates", "flags_key", "from_frozen", "history",
    "hypervolume", "load_records", "nondominated", "pareto_front", "read_records", "readable",
    "reference_point",
]

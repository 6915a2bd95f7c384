"""Results people use: the Pareto front, the best flags, the report, the dashboard's plots.

Pure over plain records (``TrialRecord``) where possible; storage reads, HTML and the
dashboard server live at the edge (``records.load_records``, ``report``, ``dashboard``).
"""

from tuner.results.best import Pick, limits_for, pick_best
from tuner.results.effects import FlagEffect, flag_effects
from tuner.results.flagdiff import changed_flags, flag_words
from tuner.results.gains import gain_pct, gains
from tuner.results.hypervolume import history, hypervolume
from tuner.results.pareto import dominates, pareto_front
from tuner.results.records import TrialRecord, from_frozen, load_records
from tuner.results.serve import config_dict, config_yaml, serve_argv, trial_document
from tuner.results.summary import Row, Summary, summarise

__all__ = [
    "FlagEffect", "Pick", "Row", "Summary", "TrialRecord", "changed_flags", "config_dict",
    "config_yaml", "dominates", "flag_effects", "flag_words", "from_frozen", "gain_pct",
    "gains", "history", "hypervolume", "limits_for", "load_records", "pareto_front",
    "pick_best", "serve_argv", "summarise", "trial_document",
]

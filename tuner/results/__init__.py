"""Results people use: the best flags, gains, the report, the dashboard's plots.

Pure over trial records (``tuner.trials.TrialRecord``: the Pareto front and hypervolume live
there too) where possible; HTML and the dashboard server live at the edge (``report``,
``dashboard``).
"""

from tuner.results.best import Pick, limits_for, pick_best
from tuner.results.effects import FlagEffect, flag_effects
from tuner.results.flagdiff import changed_flags, flag_words
from tuner.results.gains import gain_pct, gains
from tuner.results.serve import config_dict, config_yaml, serve_argv, trial_document
from tuner.results.summary import Row, Summary, summarise

__all__ = [
    "FlagEffect", "Pick", "Row", "Summary", "changed_flags", "config_dict", "config_yaml",
    "flag_effects", "flag_words", "gain_pct", "gains", "limits_for", "pick_best", "serve_argv",
    "summarise", "trial_document",
]

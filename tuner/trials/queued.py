"""Queueing a configuration that is launched exactly as given (outside the rules): the
baselines, a reference run of the default, a calibration set. Its record names it
(``baseline``), holds the flags put on the command line (``launch``) and the effective
configuration (``flags``), and its Optuna parameters are those flags of the space's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import optuna

from tuner.trials.record import TrialRecord


def enqueue_as_given(study: optuna.Study, names: Iterable[str], baseline: str,
                     launch: Mapping[str, Any], flags: Mapping[str, Any]) -> None:
    """Queue ``flags`` (``names``: the space's parameters) as the trial ``baseline``."""
    asked = TrialRecord(baseline=baseline, launch=dict(launch), flags=dict(flags))
    study.enqueue_trial({n: flags[n] for n in names}, user_attrs=asked.to_user_attrs(),
                        skip_if_exists=False)

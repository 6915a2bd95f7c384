"""Warm start: the baselines (vLLM's defaults and the article's two launches) enqueued
before the sampler's own proposals, as ``tuner study create`` does for a new study."""

from __future__ import annotations

import optuna

from tuner.space import SearchSpace, baselines
from tuner.trials.record import TrialRecord


def warm_start(study: optuna.Study, space: SearchSpace) -> int:
    """Enqueue every baseline (launched as given, outside the rules); returns how many."""
    added = baselines(space)
    for b in added:
        params = {p.name: b.flags[p.name] for p in space.params}
        asked = TrialRecord(baseline=b.name, launch=dict(b.launch), flags=dict(b.flags))
        study.enqueue_trial(params, user_attrs=asked.to_user_attrs())
    return len(added)

"""Warm start: the baselines (vLLM's defaults and the article's two launches) enqueued
before the sampler's own proposals, as ``tuner study create`` does for a new study."""

from __future__ import annotations

import optuna

from tuner.space import SearchSpace, baselines
from tuner.trials.queued import enqueue_as_given


def warm_start(study: optuna.Study, space: SearchSpace) -> int:
    """Enqueue every baseline (launched as given, outside the rules); returns how many."""
    added = baselines(space)
    for b in added:
        enqueue_as_given(study, (p.name for p in space.params), b.name, b.launch, b.flags)
    return len(added)

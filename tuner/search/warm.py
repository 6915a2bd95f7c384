"""Warm start: the baselines (vLLM's defaults and the article's two launches) enqueued
before the sampler's own proposals, as ``tuner study create`` does for a new study; and one
of them queued again (``queue_baseline``: `tuner enqueue STUDY --baseline NAME`)."""

from __future__ import annotations

import optuna

from tuner.errors import UsageError
from tuner.space import Baseline, SearchSpace, baselines
from tuner.trials.queued import enqueue_as_given


def warm_start(study: optuna.Study, space: SearchSpace) -> int:
    """Enqueue every baseline (launched as given, outside the rules); returns how many."""
    added = baselines(space)
    for b in added:
        enqueue_as_given(study, (p.name for p in space.params), b.name, b.launch, b.flags)
    return len(added)


def queue_baseline(study: optuna.Study, space: SearchSpace, name: str) -> Baseline:
    """Queue the baseline ``name`` again (as `tuner study create` queued it); UsageError
    naming the study's baselines for another name."""
    found = {b.name: b for b in baselines(space)}
    if name not in found:
        raise UsageError(f"--baseline {name}: no such baseline; choose one of "
                         f"{', '.join(found)}")
    b = found[name]
    enqueue_as_given(study, (p.name for p in space.params), b.name, b.launch, b.flags)
    return b

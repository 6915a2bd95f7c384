"""Stopping rules beside the trial budget (pure): a wall-clock deadline and convergence.

``deadline_at`` turns the study's ``search.deadline`` into an absolute time: an ISO time
("2026-12-01T08:00", the local time of the worker's host unless it has an offset) or a
duration ("8h", "90m") counted from ``tuner launch`` (the study's ``tuner.launched_at``;
a worker started by hand counts from its own start).

``trials_without_gain`` counts the finished trials since the hypervolume last grew; with
``search.patience = N`` the study stops once that count reaches N, so it ends within N
trials of its last improvement. Stopped trials (the user's, re-queued) do not count.

``reason`` combines both for ``Worker._done``: a sentence, or None to go on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from tuner.spec.durations import duration_s
from tuner.trials import default_baseline, reference_point
from tuner.trials import history as hv_history
from tuner.trials.record import STOPPED
from tuner.trials.reference import study_rule

LAUNCHED_AT = "tuner.launched_at"  # study user attr: epoch seconds of the last launch



def deadline_at(text: str | None, launched_at: float) -> float | None:
    """Epoch seconds after which no trial starts; None without a deadline."""
    if not text:
        return None
    seconds = duration_s(text)
    if seconds is not None:
        return launched_at + seconds
    when = dt.datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.astimezone()  # the host's local time zone
    return when.timestamp()


def trials_without_gain(history: Sequence[tuple[int, float]], eps: float = 1e-12) -> int:
    """Finished trials after the last one that grew the hypervolume (all of them when it
    never grew above zero). ``history`` is (trial number, hypervolume so far) per trial."""
    best, since = 0.0, 0
    for _, volume in history:
        if volume > best * (1 + eps) + eps:
            best, since = volume, 0
        else:
            since += 1
    return since


def reason(deadline: float | None, patience: int | None, history: Sequence[tuple[int, float]],
           now: float) -> str | None:
    """Why the study should start no more trials, or None."""
    if deadline is not None and now >= deadline:
        stamp = dt.datetime.fromtimestamp(deadline).astimezone().isoformat(timespec="minutes")
        return f"the study's deadline ({stamp}) has passed"
    if patience is not None:
        idle = trials_without_gain(history)
        if idle >= patience:
            return (f"the hypervolume has not improved for {idle} trials "
                    f"(search.patience = {patience})")
    return None


def study_reason(spec, records, launched_at: float, now: float) -> str | None:
    """``reason`` for a study's spec and its trial records (``tuner.trials`` records);
    pure. The hypervolume's reference is the study's (``tuner.trials.reference``), as in
    the results; stopped trials are left out."""
    search = spec.search
    if not search.deadline and not search.patience:
        return None
    history: list[tuple[int, float]] = []
    if search.patience:
        kept = [r for r in records if r.outcome != STOPPED]
        goals = spec.objectives
        ref, _ = reference_point(default_baseline(kept), goals, study_rule(spec))
        history = hv_history(kept, goals, ref)
    return reason(deadline_at(search.deadline, launched_at), search.patience, history, now)

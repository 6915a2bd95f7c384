"""Questions the layers ask of a study's trials (pure over records, but ``load_records``).

``load_records`` is the only storage read: one ``get_trials`` call, no transaction held, so
a study in progress can be read at any time. Stored records are input (whoever can write
the database writes them): ``readable`` / ``read_records`` skip a trial whose record does
not read back (``tuner.errors.BadRecordError``: a wrong JSON type, a number out of range,
a curve too long) with one warning per trial naming it, so that no reader (the results,
the status, the API, the search's history) meets a bad record or raises on one.
Everything else is a pure function over the
records: which trials spend the budget (``counted``), the best measured value so far
(``best_value``), vLLM's default baseline, an earlier trial with the same effective flags
(``already_measured``), the counts per outcome. ``outcome_of``, ``flags_of``,
``baseline_of`` and ``started`` read one attribute of an Optuna ``FrozenTrial`` without
building its whole record (the search asks them of every trial for every proposal).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner import optuna_adapter
from tuner.errors import BadRecordError
from tuner.trials.parts import FailureKind
from tuner.trials.record import (COMPLETE, DEFAULT_BASELINE, DUPLICATE, FAIL, INFEASIBLE,
                                 MEASURED, RUNNING, STARTS, STOPPED, Outcome, TrialRecord,
                                 flags_key)


# Where Optuna's heartbeat retry (``RetryHeartbeatStaleTrialCallback``) names the closed
# trial that a queued copy runs again.
RETRY_OF = "failed_trial"


def from_frozen(t: FrozenTrial) -> TrialRecord:
    """The record of a stored trial (pure: reads only the given object)."""
    return TrialRecord.from_user_attrs(
        t.user_attrs, number=t.number, state=t.state.name.lower(),
        values=tuple(float(v) for v in t.values) if t.values is not None else None,
        constraints=dict(t.constraints or {}), trial_id=optuna_adapter.frozen_trial_id(t),
        retry_of=t.system_attrs.get(RETRY_OF))


log = logging.getLogger(__name__)
_warned: set[tuple[int | None, int]] = set()  # (storage id, number): warned of already


def readable(t: FrozenTrial, study: str | None = None) -> TrialRecord | None:
    """The trial's record, or None when its stored record does not read back; then a
    warning names the trial (of ``study``) and what is wrong, once per trial and process."""
    try:
        return from_frozen(t)
    except BadRecordError as e:
        skipped(optuna_adapter.frozen_trial_id(t), t.number, study,
                f"its stored record is not one a tuner writes ({e})")
        return None


def skipped(trial_id: int | None, number: int, study: str | None, why: str) -> None:
    """Warn that a reader leaves trial ``number`` (of ``study``) out, and ``why``: once per
    trial and process, whichever reader skips it."""
    key = (trial_id, number)
    if key not in _warned:
        _warned.add(key)
        of = f" of study {study!r}" if study else ""
        log.warning("skipping trial %d%s: %s", number, of, why)


def read_records(trials: Iterable[FrozenTrial],
                 study: str | None = None) -> tuple[TrialRecord, ...]:
    """The records of ``trials`` that read back (``readable``), in trial-number order."""
    records = (r for r in (readable(t, study) for t in trials) if r is not None)
    return tuple(sorted(records, key=lambda r: r.number))


def load_records(study: optuna.Study) -> tuple[TrialRecord, ...]:
    """Every trial of ``study`` (any state) whose record reads back, in number order."""
    return read_records(study.get_trials(deepcopy=False), study.study_name)


# A failed trial of this class measured the client, not the server (the runner ran it
# again on the same server first): it says nothing of its flags and spends no budget.
INVALID_MEASUREMENT = FailureKind.INVALID_MEASUREMENT


def measured_the_client(r: TrialRecord) -> bool:
    return r.state == FAIL and r.failure is not None and r.failure.kind == INVALID_MEASUREMENT


def spends_budget(r: TrialRecord) -> bool:
    """Whether the trial spends the study's budget: finished or running, not a duplicate,
    a stopped trial or an invalid measurement. The one count of trials: the budget's
    (``search.n_trials``), `tuner status`'s "spent", a worker's ``[n/N]`` and its
    ``--n-trials`` all count these."""
    return (r.state == RUNNING or (r.state == COMPLETE and r.outcome != DUPLICATE)
            or (r.state == FAIL and r.outcome != STOPPED and not measured_the_client(r)))


def counted(records: Sequence[TrialRecord]) -> int:
    """Trials that spend the study's budget (``spends_budget``), but a trial closed by a
    heartbeat that has a retry (the retry stands for it: counted once it runs, and it is
    run even when the closed trial was the budget's last)."""
    retried = {r.retry_of for r in records if r.retry_of is not None}
    return sum(1 for r in records if spends_budget(r) and r.number not in retried)


def best_value(records: Sequence[TrialRecord], direction: str) -> float | None:
    """The best value of the first objective among measured trials that met every
    constraint (None before one did)."""
    best = None
    for r in records:
        if r.state != COMPLETE or r.outcome != MEASURED or any(
                v > 0 for v in r.constraints.values()):
            continue
        v = r.values[0]
        if best is None or (v > best if direction == "maximize" else v < best):
            best = v
    return best


def default_baseline(records: Sequence[TrialRecord]) -> TrialRecord | None:
    """The measured trial of vLLM's default configuration, if there is one."""
    return next((r for r in records if r.baseline == DEFAULT_BASELINE and r.measured), None)


def already_measured(records: Sequence[TrialRecord], flags: Mapping[str, Any],
                     exclude: int) -> TrialRecord | None:
    """An earlier finished trial with the same effective flags that was measured or found
    infeasible (a duplicate's source is followed to the original)."""
    key = flags_key(flags)
    for r in records:
        if (r.state == COMPLETE and r.number != exclude and r.outcome in (MEASURED, INFEASIBLE)
                and flags_key(r.flags) == key):
            return r
    return None


def counts(records: Sequence[TrialRecord]) -> dict[str, int]:
    """How many trials per outcome (or per state while not told)."""
    out: dict[str, int] = {}
    for r in records:
        key = r.outcome.value if r.told and r.outcome else r.state
        out[key] = out.get(key, 0) + 1
    return out


def describe_counts(records: Sequence[TrialRecord]) -> str:
    """'12 trials: 8 measured, 2 infeasible, ...' for messages."""
    c = counts(records)
    if not c:
        return "no trials"
    parts = ", ".join(f"{v} {k}" for k, v in sorted(c.items(), key=lambda kv: -kv[1]))
    return f"{len(records)} trials: {parts}"


# One attribute of an Optuna trial, for the search's hot loops --------------------------

def outcome_of(t: FrozenTrial) -> Outcome | None:
    value = t.user_attrs.get("outcome")
    return None if value is None else Outcome(value)


def flags_of(t: FrozenTrial) -> dict[str, Any]:
    return dict(t.user_attrs.get("flags") or {})


def baseline_of(t: FrozenTrial) -> str | None:
    return t.user_attrs.get("baseline")


def is_default_baseline(t: FrozenTrial) -> bool:
    return baseline_of(t) == DEFAULT_BASELINE


def started(t: FrozenTrial) -> bool:
    """Measured: complete with finite values, neither ``starts`` > 0 nor infeasible."""
    return (t.state == TrialState.COMPLETE and t.values is not None
            and all(math.isfinite(v) for v in t.values)
            and (t.constraints or {}).get(STARTS, 0.0) <= 0
            and outcome_of(t) != INFEASIBLE)

"""The few places where tuner reaches into Optuna's private state, each because Optuna (4.x)
has no public form of it. Everything else uses the public API (``study.user_attrs``,
``study.set_user_attr``, ``trial.set_user_attr``, ``study.tell``, ``study.get_trials``,
``optuna.Trial.storage``...). If Optuna renames one of these, tuner breaks here, in one
module; ``tests/unit/test_imports.py`` checks that no other module names a private
attribute of Optuna's objects.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial


def frozen_trial_id(t: FrozenTrial) -> int | None:
    """The storage's id of a stored trial. Why private: ``FrozenTrial`` exposes ``number``
    only, and the dashboard's notes and the heartbeat are keyed by the storage's id."""
    return getattr(t, "_trial_id", None)


def trial_id(trial: optuna.Trial) -> int:
    """The storage's id of a live trial. Why private: ``Trial`` exposes ``number`` only,
    and the storage's calls (heartbeat, system attributes) take the id."""
    return trial._trial_id


def live_trial(study: optuna.Study, t: FrozenTrial) -> optuna.Trial:
    """A writable ``Trial`` for a stored, running trial (to tell it from another process).
    Why private: ``optuna.Trial`` is built from the storage's id, which only the private
    ``_trial_id`` holds."""
    return optuna.Trial(study, t._trial_id)


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The study's storage object (to load the same study again with another sampler on
    the same connection pool and heartbeat settings, or to beat for a trial). Why private:
    ``Study`` keeps it as ``_storage`` only (``optuna.Trial.storage`` needs a trial)."""
    return study._storage


def study_id(study: optuna.Study) -> int:
    """The storage's id of a study (optuna-dashboard's URLs and notes use it). Why private:
    ``Study`` exposes its name only."""
    return study._study_id


def summary_study_id(summary: Any) -> int:
    """The storage's id of a ``StudySummary`` / ``FrozenStudy``, to read its trials without
    loading each study by name (one query more per study). Why private: no public field."""
    return summary._study_id


def stored_trial(study: optuna.Study, trial: optuna.Trial) -> FrozenTrial:
    """The trial as the storage has it now (another worker may have closed it). Why
    private: ``study.get_trials`` reads every trial; this reads one, by the storage's id."""
    return trial.storage.get_trial(trial_id(trial))


def set_trial_system_attr(study: optuna.Study, trial: FrozenTrial, key: str,
                          value: Any) -> None:
    """A system attribute on the trial a sampler is proposing for. Why private: samplers
    get a ``FrozenTrial``, which cannot write, and ``Trial.set_system_attr`` is deprecated
    (Optuna's own samplers write through the storage the same way)."""
    storage_of(study).set_trial_system_attr(frozen_trial_id(trial), key, value)


def set_trial_user_attr(study: optuna.Study, trial: FrozenTrial, key: str, value: Any) -> None:
    """A user attribute on a trial the sampler is starting (``before_trial``). Why private:
    a ``FrozenTrial`` cannot write, and building an ``optuna.Trial`` for it would call the
    sampler's ``before_trial`` again."""
    storage_of(study).set_trial_user_attr(frozen_trial_id(trial), key, value)


def record_heartbeat(study: optuna.Study, trial_id_: int) -> None:
    """Beat for a running trial now. Why private: ask/tell runs no heartbeat thread of its
    own (only ``Study.optimize`` does), and a worker killed before its first periodic beat
    would otherwise leave its trial running for ever."""
    storage = storage_of(study)
    if hasattr(storage, "record_heartbeat"):
        storage.record_heartbeat(trial_id_)



# optuna-dashboard's notes: its public ``get_note`` / ``save_note`` read every system
# attribute of the study again for each note, which grows with the study; these do the
# same writes from one read. Why private: ``optuna_dashboard._note`` is the only home of
# the note's key layout.

def study_system_attrs(study: optuna.Study) -> dict[str, Any]:
    return storage_of(study).get_study_system_attrs(study_id(study))


def read_note(attrs: dict[str, Any], trial_id_: int) -> dict[str, Any]:
    """{"version", "body"} of a trial's note, from the study's system attributes."""
    from optuna_dashboard import _note

    return _note.get_note_from_system_attrs(attrs, trial_id_)


def write_note(study: optuna.Study, trial_id_: int, version: int, body: str,
               attrs: dict[str, Any]) -> None:
    """optuna-dashboard's ``save_note_with_version`` without its read-back: the chunks an
    older, longer note left are blanked from the attributes already read."""
    from optuna_dashboard import _note

    storage, sid = storage_of(study), study_id(study)
    chunks = _note.split_body(body, trial_id_)
    prefix = _note.note_str_key_prefix(trial_id_)
    stale = [k for k in attrs if k.startswith(prefix) and k not in chunks]
    storage.set_study_system_attr(sid, _note.note_ver_key(trial_id_), version)
    for key, value in [*chunks.items(), *((k, "") for k in stale if attrs[k])]:
        storage.set_study_system_attr(sid, key, value)


def non_dominated_boxes(front, ref):
    """(lower, upper) corners (boxes x objectives) of boxes that tile the region below
    ``ref`` that no point of ``front`` (minimised, each inside ``ref``) dominates: Optuna's
    box decomposition, as its GPSampler computes expected hypervolume improvement."""
    from optuna._hypervolume import get_non_dominated_box_bounds

    return get_non_dominated_box_bounds(front, ref)

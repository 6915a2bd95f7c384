"""Studies in storage: create (idempotent), open by name, list.

The validated study definition, its effective space and rule set are stored on the Optuna
study (user attributes under ``tuner.``), so any worker that can reach the storage can
run the study from its name alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import optuna
import sqlalchemy.exc

from tuner import optuna_adapter
from tuner import __version__
from tuner.errors import StorageError, StudyConflictError, StudyNotFoundError, UsageError
from tuner.installed import Installed
from tuner.installed.probe import ProbeError, ask_sim, cached_vllm
from tuner.space import CATALOGUE, SearchSpace, baselines, build_space
from tuner.spec.changes import CHANGEABLE, changes, first_refused
from tuner.storage.load import spec_from_json
from tuner.spec.study import StudySpec, is_study_name
from tuner.storage.database import mask, open_storage, study_dir
from tuner.trials.queries import baseline_of
from tuner.trials.queued import enqueue_as_given

SPEC, SPACE, RULES, OBJECTIVES, VERSION, ENGINE = (
    "tuner.spec", "tuner.space", "tuner.rules", "tuner.objectives", "tuner.version",
    "tuner.engine")
ASK = object()  # create_study's default: ask the study's engine on this host
CREATING, READY = "tuner.creating", "tuner.ready"
READY_WAIT_S = 30.0  # how long a second `study create` waits for the first to finish

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class OpenStudy:
    """A stored study with its definition and effective space."""

    study: optuna.Study
    spec: StudySpec
    space: SearchSpace
    # why the engine was not asked (its python missing here, say); "" when it answered
    engine_note: str = ""
    # what `create_study` changed on an existing study ("search.n_trials 20 -> 30")
    changed: tuple[str, ...] = ()


def _space_or_usage_error(spec: StudySpec, installed: Installed | None = None) -> SearchSpace:
    try:
        return build_space(spec, installed)
    except (ValueError, KeyError) as e:
        raise UsageError(f"study {spec.name}: {e.args[0]}") from e


def ask_engine(spec: StudySpec, gpus=()) -> Installed:
    """What the study's engine answers on this host: vLLM through its parser in a
    subprocess of the study's python (cached per version in the study's folder); the
    simulator as its own process, asked the same way. ProbeError when it cannot be
    asked."""
    if spec.engine.kind == "sim":
        return ask_sim(spec.hardware.gpu)
    return cached_vllm(spec.engine.python, study_dir(spec.name) / "engine", spec.engine.env,
                       spec.model.tensor_parallel_size, gpus)


def ask_study_engine(spec: StudySpec, gpus=()) -> tuple[Installed | None, str]:
    """The engine's answer on this host, or None and why (one line)."""
    try:
        return ask_engine(spec, gpus), ""
    except ProbeError as e:
        return None, (f"engine not asked ({e}); the catalogue's flags and defaults are used "
                      "until a worker asks it")


def stored_engine(study: optuna.Study) -> Installed | None:
    data = study.user_attrs.get(ENGINE)
    return Installed.from_json(data) if data else None


def _identity(spec: StudySpec, space: SearchSpace) -> dict[str, Any]:
    return {SPACE: space.describe(), RULES: space.rules.name,
            OBJECTIVES: [o.model_dump() for o in spec.objectives]}


def create_study(spec: StudySpec, storage_url: str,
                 installed: Installed | None | object = ASK) -> tuple[OpenStudy, bool]:
    """Create the study, or return the existing one if its definition matches.

    Returns (study, created). On an existing study the file's budget is applied (the keys
    of ``changes.CHANGEABLE``; ``OpenStudy.changed`` says what changed); any other
    difference, or another space, objectives or rule set from this host's engine, is
    refused with ``StudyConflictError``. A new study enqueues the baselines. The
    space is decided by what the study's engine answers on this host (``installed``: that
    answer given, or None for the catalogue alone); the answer is stored on the study.
    """
    note = ""
    if installed is ASK:
        installed, note = ask_study_engine(spec)
    space = _space_or_usage_error(spec, installed)
    storage = open_storage(storage_url)
    identity = json.loads(json.dumps(_identity(spec, space), default=str))
    directions = [o.direction for o in spec.objectives]
    study = _ready_study(spec.name, storage)
    if study is not None:
        return _existing(study, spec, storage_url, identity, space, note), False
    try:
        study = optuna.create_study(study_name=spec.name, storage=storage,
                                    directions=directions, load_if_exists=False)
    except optuna.exceptions.DuplicatedStudyError:
        return create_study(spec, storage_url, installed)  # another process won
    # Create, then mark ready: another `study create` of the same name waits for READY
    # (it would otherwise read a half-written study), and nothing else runs it before then.
    study.set_user_attr(CREATING, f"{socket.gethostname()}-{os.getpid()}")
    for key, value in identity.items():
        study.set_user_attr(key, value)
    study.set_user_attr(SPEC, spec.model_dump(mode="json"))
    study.set_user_attr(VERSION, __version__)
    if installed is not None:
        study.set_user_attr(ENGINE, installed.only(p.name for p in CATALOGUE).to_json())
    if spec.search.baselines:
        for b in baselines(space):
            enqueue_as_given(study, (p.name for p in space.params), b.name, b.launch, b.flags)
    study.set_user_attr(READY, True)
    return OpenStudy(study, spec, space, note), True


def _existing(study: optuna.Study, spec: StudySpec, storage_url: str, identity: dict,
              space: SearchSpace, note: str) -> OpenStudy:
    """The stored study with the file's budget applied; ``StudyConflictError`` for any
    other change (named by its first key)."""
    stored_spec = spec_from_json(study.user_attrs[SPEC], spec.name)
    found = changes(stored_spec, spec)
    bad = first_refused(found)
    if bad is not None:
        raise StudyConflictError(
            f"study {spec.name} already exists in {mask(storage_url)} with another "
            f"{bad.key}: {bad.values('stored, the file has')}; only {', '.join(CHANGEABLE)} "
            "may change on a stored study: to start a new study, set name = \"...\" in the "
            "file")
    stored = {k: study.user_attrs.get(k) for k in identity}
    if stored != identity:
        changed = [k.removeprefix("tuner.") for k in identity if stored[k] != identity[k]]
        raise StudyConflictError(
            f"study {spec.name} already exists in {mask(storage_url)} with another "
            f"{' and '.join(changed)}; give the study a new name")
    if found:
        study.set_user_attr(SPEC, spec.model_dump(mode="json"))
        stored_spec = spec
    return OpenStudy(study, stored_spec, space, note, tuple(str(c) for c in found))


def with_stored_search(opened: OpenStudy) -> OpenStudy:
    """``opened`` with the ``[search]`` section stored now: the budget, deadline and
    patience that `tuner study create` may change while workers run (``CHANGEABLE``), so
    that a running worker honours a raised or lowered budget at its next trial."""
    stored = (opened.study.user_attrs.get(SPEC) or {}).get("search")
    if not stored:
        return opened
    search = type(opened.spec.search).model_validate(stored)
    if search == opened.spec.search:
        return opened
    return dataclasses.replace(opened, spec=opened.spec.model_copy(update={"search": search}))


def is_ready(attrs: dict[str, Any]) -> bool:
    """The study's creation finished (studies from before READY existed: their spec)."""
    return bool(attrs.get(READY)) or (SPEC in attrs and CREATING not in attrs)


def _ready_study(name: str, storage, wait_s: float = READY_WAIT_S) -> optuna.Study | None:
    """The stored study once its creator has marked it ready; None if there is none.
    ``UsageError`` if it stays half-created (its creator died) for ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            study = optuna.load_study(study_name=name, storage=storage)
        except KeyError:
            return None
        if is_ready(study.user_attrs):
            return study
        if time.monotonic() > deadline:
            raise UsageError(f"study {name} is half-created (its creator "
                             f"{study.user_attrs.get(CREATING, '?')} stopped before it was "
                             "ready); delete it or give the study a new name")
        time.sleep(0.2)


def open_study(name: str, storage_url: str, heartbeat: bool = False) -> OpenStudy:
    """A stored study by name; ``StudyNotFoundError`` lists the names that exist."""
    if not is_study_name(name):
        raise StudyNotFoundError(f"no study {name!r}: a study name is up to 100 letters, "
                                 "digits, '.', '_' and '-', starting with a letter or digit")
    try:
        storage = open_storage(storage_url, heartbeat=heartbeat, create=False)
    except StudyNotFoundError as e:
        raise StudyNotFoundError(f"no study {name!r}: {e}") from None
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        known = ", ".join(names) if names else "none"
        raise StudyNotFoundError(f"no study {name!r} in {mask(storage_url)} "
                                 f"(studies there: {known}); create it with "
                                 "`tuner study create FILE`") from None
    except sqlalchemy.exc.SQLAlchemyError as e:
        raise StorageError(f"cannot read study {name!r}: {e}") from e
    if SPEC not in study.user_attrs:
        raise UsageError(f"study {name!r} was not created by tuner (no stored definition)")
    if not is_ready(study.user_attrs):
        raise UsageError(f"study {name!r} is still being created; try again in a moment")
    spec = spec_from_json(study.user_attrs[SPEC], name)
    return OpenStudy(study, spec, _space_or_usage_error(spec, stored_engine(study)))


@dataclass(frozen=True)
class StudyRow:
    name: str
    rules: str
    directions: tuple[str, ...]
    states: dict[str, int]
    baselines_queued: int


def list_studies(storage_url: str) -> list[StudyRow]:
    try:
        storage = open_storage(storage_url, create=False)
    except StudyNotFoundError:
        return []  # nothing was ever created there; make no file and no tables
    rows = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        trials = storage.get_all_trials(optuna_adapter.summary_study_id(s), deepcopy=False)
        states: dict[str, int] = {}
        for t in trials:
            states[t.state.name.lower()] = states.get(t.state.name.lower(), 0) + 1
        queued = sum(1 for t in trials if t.state.name == "WAITING" and baseline_of(t))
        rows.append(StudyRow(s.study_name, str(s.user_attrs.get(RULES, "-")),
                             tuple(d.name.lower() for d in s.directions), states, queued))
    return rows

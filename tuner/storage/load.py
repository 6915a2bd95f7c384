"""Loading a study file: TOML -> validated, frozen ``StudySpec``, or one clear error.

An error names the file, the key and what to do about it, on one line.
"""

from __future__ import annotations

import difflib
import json
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tuner.errors import StudyFileError, UsageError
from tuner.loadgen.spec import error_text
from tuner.loadgen.trace import load_trace
from tuner.space import build_space
from tuner.spec.study import StudySpec, file_objectives

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _key(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc if not str(p).startswith("function-after"))


def _section(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model (section) that holds the key at ``loc``, or None."""
    model: Any = StudySpec
    for part in loc[:-1]:
        if isinstance(part, int):
            continue  # an item of a list ([[objectives]])
        field = model.model_fields.get(str(part)) if isinstance(model, type) else None
        if field is None:
            return None
        model = next((t for t in (field.annotation, *typing.get_args(field.annotation))
                      if isinstance(t, type) and issubclass(t, BaseModel)), None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _nearest(loc: tuple[Any, ...]) -> str | None:
    """The section's valid key closest to a misspelt one (difflib), or None."""
    section = _section(loc)
    if section is None or not loc:
        return None
    found = difflib.get_close_matches(str(loc[-1]), list(section.model_fields), n=1)
    return found[0] if found else None


def _explain(path: Path, err: ValidationError) -> str:
    first = err.errors()[0]
    key = _key(first["loc"]) or "(top level)"
    kind = first["type"]
    if kind == "extra_forbidden":
        near = _nearest(first["loc"])
        hint = (f"no such key; did you mean '{near}'?" if near
                else "no such key; remove it or check its spelling")
    elif kind == "missing":
        hint = "add it"
    else:
        hint = error_text(first)
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{path}: key '{key}': {hint}{more}"


def read_model_config(folder: Path) -> dict[str, Any]:
    """The model folder's config.json, or {} when the folder is not on this host."""
    cfg = folder / "config.json"
    if not cfg.is_file():
        return {}
    return json.loads(cfg.read_text())


def _with_model_facts(spec: StudySpec, path: Path) -> StudySpec:
    """Absolute model path; context, heads and vocabulary filled from config.json."""
    model = spec.model
    folder = Path(model.path)
    if not folder.is_absolute():
        folder = (path.parent / folder).resolve()
    try:
        cfg = read_model_config(folder)
    except (ValueError, OSError) as e:  # JSON and UTF-8 errors are ValueErrors
        raise StudyFileError(f"{path}: key 'model.path': {folder}/config.json is not "
                             f"readable JSON: {str(e).splitlines()[0]}") from e
    update: dict[str, Any] = {"path": str(folder)}
    for field, key in (("context_len", "max_position_embeddings"),
                       ("num_attention_heads", "num_attention_heads"),
                       ("vocab_size", "vocab_size")):
        if getattr(model, field) is None and key in cfg:
            update[field] = int(cfg[key])
    model = model.model_copy(update=update)
    if model.context_len is None:
        # The folder is what is wrong (a typo in model.path, most often), not the context.
        what = (f"{folder} has no config.json" if folder.is_dir()
                else f"no model folder {folder}")
        raise StudyFileError(
            f"{path}: key 'model.path': {what}; put the model folder there, or give "
            "model.context_len for a folder on the workers' hosts only")
    return spec.model_copy(update={"model": model})


def _with_trace(spec: StudySpec, path: Path) -> tuple[StudySpec, int]:
    """The spec with its trace's path resolved against the study file's folder and its
    digest (``trace_sha256``, which every later read checks), read once here (a bad trace,
    or one whose digest is not the file's own ``trace_sha256``, is the study file's error),
    and the workload's longest request."""
    w = spec.workload
    if w.trace is None:
        return spec, w.longest_request
    path_of = (path.parent / w.trace).resolve()
    try:
        trace = load_trace(path_of, w.trace_sha256)
    except UsageError as e:
        raise StudyFileError(f"{path}: key 'workload.trace': {e}") from None
    w = w.model_copy(update={"trace": str(path_of), "trace_sha256": trace.sha256})
    return (spec.model_copy(update={"workload": w}),
            max(r.input_tokens + r.output_tokens for r in trace.records))


MAX_FILE_BYTES = 1_000_000  # a study file is a page of TOML; more is a mistake


def _read_text(path: Path) -> str:
    """The file's text; StudyFileError for a missing, huge, binary or non-file path."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise StudyFileError(f"{path}: no such study file") from None
    except IsADirectoryError:
        raise StudyFileError(f"{path}: is a directory; give a study file (.toml)") from None
    except OSError as e:
        raise StudyFileError(f"{path}: cannot read it: {e.strerror}") from e
    if len(data) > MAX_FILE_BYTES:
        raise StudyFileError(f"{path}: larger than 1 MB; a study file is a short TOML file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StudyFileError(f"{path}: not a text file (UTF-8 TOML expected; byte "
                             f"{e.start} is 0x{data[e.start]:02x})") from None


def names_itself(path: str | Path) -> bool:
    """The study file sets ``name`` (else the study is named after the file)."""
    try:
        return "name" in tomllib.loads(_read_text(Path(path)))
    except tomllib.TOMLDecodeError:
        return False


def load_study_file(path: str | Path) -> StudySpec:
    """Read and validate a study file; raise ``StudyFileError`` naming the key at fault."""
    path = Path(path)
    try:
        raw = tomllib.loads(_read_text(path))
    except tomllib.TOMLDecodeError as e:
        raise StudyFileError(f"{path}: not valid TOML: {e}") from e
    raw.setdefault("name", path.stem)
    try:
        spec = StudySpec.model_validate(file_objectives(raw))
    except ValidationError as e:
        raise StudyFileError(_explain(path, e)) from e
    spec = _with_model_facts(spec, path)
    spec, longest = _with_trace(spec, path)
    if longest > spec.model.context_len:
        raise StudyFileError(
            f"{path}: key 'workload': the longest request needs "
            f"{longest} tokens but the model's context is "
            f"{spec.model.context_len}; shorten input_len/output_len")
    _check_space(spec, path)
    return spec


def _check_space(spec: StudySpec, path: Path) -> None:
    """The effective space can be built: every [space] value checked against the catalogue."""
    try:
        build_space(spec)
    except (ValueError, KeyError) as e:
        raise StudyFileError(f"{path}: {e.args[0]}") from e


def spec_from_json(data: dict[str, Any], name: str | None = None) -> StudySpec:
    """A spec as stored on a study (already resolved); no file involved. The storage is
    input too: an invalid stored definition, or one whose name is not the study's, is a
    ``StudyFileError`` naming the study and the key."""
    where = Path(f"stored study {name or '?'}")
    try:
        spec = StudySpec.model_validate(data)
    except ValidationError as e:
        raise StudyFileError(_explain(where, e)) from e
    if name is not None and spec.name != name:
        raise StudyFileError(f"{where}: key 'name': the stored definition names study "
                             f"{spec.name!r}; recreate the study with `tuner study create`")
    return spec

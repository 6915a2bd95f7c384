"""Folders under ``$TUNER_HOME`` (the default storage, study logs, GPU locks, caches),
made and checked writable before anything needs them, or refused with one line."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tuner.errors import TunerError


def writable_folder(path: Path, what: str, error: type[TunerError] = TunerError,
                    remedy: str = "set TUNER_HOME to a writable folder") -> Path:
    """``path``, made if missing and proved writable by writing a file there (permission
    bits alone say nothing for root); else ``error`` naming the folder, the reason and
    what to do (``remedy``: the setting that moves the folder)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise error(f"cannot write {what} in {path}: {e.strerror or e}; make it writable "
                    f"or {remedy}") from e
    return path

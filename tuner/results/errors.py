"""The results' errors (both exit 1), under ``tuner.errors.TunerError``."""

from __future__ import annotations

from tuner.errors import MissingDependencyError, NoResultsError

__all__ = ["MissingDependencyError", "NoResultsError", "need"]


def need(module: str, package: str, what: str):
    """Import ``module`` or say which package to install for ``what``."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(f"{what} needs {package}: pip install {package}") from e

"""One exception tree for tuner.

    TunerError                  root; the CLI catches it, prints one line, exits non-zero
    ├── UsageError              bad input a user can fix (exit code 2)
    │   ├── StudyFileError      a study file is malformed: names the file and the key
    │   ├── TraceError          a trace file is unreadable, no trace, or not the study's
    │   ├── StudyConflictError  a study exists with another space, objectives or rule set
    │   └── StudyNotFoundError  no study of that name in the storage
    ├── StorageError            the database cannot be reached or used (exit code 1)
    │   └── StorageUnreachable  it stayed unreachable for the whole retry budget
    ├── EngineError             a vLLM (or simulated) server failed (exit code 1)
    │   ├── EngineExitedError   the server exited before it was ready (with its return code)
    │   └── EngineTimeoutError  the server was not ready within the time allowed
    ├── BenchmarkError          the load generator could not run at all (exit code 1)
    ├── AccuracyError           the accuracy guard got no usable completions (recorded on
    │                           the trial, which then fails its accuracy constraint)
    ├── LaunchError             `tuner launch` could not start its workers (exit code 1)
    ├── NoResultsError          the study has nothing that answers the question yet (exit 1)
    ├── BadRecordError          a stored trial record is not one a tuner writes (a wrong
    │                           type, a number out of range): its readers skip the trial
    └── MissingDependencyError  an optional package a command needs is missing (exit code 1)
        └── SamplerUnavailable  the study file names a sampler whose package is missing (2)

Foreign exceptions are translated once, at the boundary, with ``raise ... from e``.
"""

from __future__ import annotations


class TunerError(Exception):
    """Root of every error tuner raises on purpose."""

    exit_code = 1


class UsageError(TunerError):
    """Input the user can fix: a flag, a file, a name."""

    exit_code = 2


class StudyFileError(UsageError):
    """A study file failed validation."""


class TraceError(UsageError):
    """A trace file cannot be replayed: unreadable, not a trace, or (at bench time) not
    the file the study was created with; a trial then fails with this reason."""


class StudyConflictError(UsageError):
    """A study of that name exists with a different definition."""


class StudyNotFoundError(UsageError):
    """No study of that name exists in the storage."""


class BadRecordError(TunerError, ValueError):
    """A stored trial's attribute is not of its type or out of its range (someone wrote the
    database); a reader skips that trial with a warning (``tuner.trials.queries``). A
    ``ValueError`` too, for the callers that read one attribute and catch that."""


class StorageError(TunerError):
    """The storage cannot be reached or used."""


class EngineError(TunerError):
    """An engine process failed."""


class EngineExitedError(EngineError):
    """The engine exited before it became healthy."""

    def __init__(self, returncode: int, message: str = "") -> None:
        self.returncode = returncode
        super().__init__(message or f"engine exited with code {returncode}")


class EngineTimeoutError(EngineError):
    """The engine did not become healthy in time."""

    def __init__(self, seconds: float, message: str = "") -> None:
        self.seconds = seconds
        super().__init__(message or f"engine not ready within {seconds:.0f} s")


class BenchmarkError(TunerError):
    """The load generator could not run."""


class AccuracyError(TunerError):
    """The accuracy guard could not get greedy completions with logprobs from a server."""


class StorageUnreachable(StorageError):
    """The database stayed unreachable for the whole retry budget."""


class LaunchError(TunerError):
    """The workers could not be started (GPUs unknown or busy, a worker exited)."""


class NoResultsError(TunerError):
    """The study has nothing that answers the question yet."""


class MissingDependencyError(TunerError):
    """An optional package a command needs is not installed."""


class SamplerUnavailable(MissingDependencyError):
    """The study file's ``search.sampler`` needs a package this install lacks: the user
    fixes it (install the package or choose another sampler) before the study exists."""

    exit_code = 2

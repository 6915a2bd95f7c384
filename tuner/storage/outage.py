"""Storage calls that outlive a database outage.

A worker that loses its database mid-trial keeps what it measured and waits: ``retrying``
runs a storage call again after 1 s, 2 s, 4 s ... (capped at 30 s) for up to
``$TUNER_STORAGE_RETRY_S`` seconds (default six hours), printing one line per wait:

    storage unreachable, retrying in 4 s: connection to server at "db" failed: ...

Only errors that mean "the database cannot be reached right now" are retried
(``transient``): a connection that failed, dropped or timed out, a statement the server
cancelled at its timeout, a lock held by another process. An error that waiting does not
mend (``permanent``: a read-only SQLite file or folder, a full disk, a login refused) is
not, and neither is any other database error: each, like an outage longer than the budget,
becomes one ``StorageError`` with the password masked. Foreign errors (SQLAlchemy, psycopg, Optuna's
``StorageInternalError`` that wraps them) are translated here and nowhere else.

The call must be safe to repeat: a write that reached the database before the connection
broke is done again (see ``tuner.runner.tell`` for how telling a trial stays idempotent).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import sqlalchemy.exc

from tuner.errors import StorageError, StorageUnreachable
from tuner.settings import settings

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_WAIT_S = 1.0
MAX_WAIT_S = 30.0

# user:password@ in any URL-like text; the password is the part we hide.
_CREDENTIALS = re.compile(r"(://[^:/@\s]*:)[^@\s]*(@)")
_PASSWORD_WORD = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


# The server answered and said no: a configuration error, not an outage; waiting won't help.
_REFUSALS = ("password authentication failed", "no pg_hba.conf entry",
             "authentication failed", "role \"")


def budget_s() -> float:
    """Seconds to keep retrying: ``$TUNER_STORAGE_RETRY_S``, else six hours."""
    return settings().storage_retry_s


def waits(first: float = FIRST_WAIT_S, cap: float = MAX_WAIT_S) -> Iterator[float]:
    """1, 2, 4, ... seconds, never more than ``cap``."""
    wait = first
    while True:
        yield min(wait, cap)
        wait *= 2


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


# SQLite's result codes that mean "another process holds the database; try again". Every
# other error SQLite reports (read-only file or folder, disk full, cannot open the file,
# corrupt) stays until someone mends it.
_SQLITE_WAIT = ("SQLITE_BUSY", "SQLITE_LOCKED")
# PostgreSQL's SQLSTATEs that waiting does not mend: disk full, a read-only transaction
# (a standby server), no privilege.
_POSTGRES_PERMANENT = ("53100", "25006", "42501")


def permanent(error: BaseException) -> bool:
    """True when the database answered and the answer will not change by waiting: a
    refused login, a read-only SQLite file or folder, a full disk (SQLite or PostgreSQL)."""
    for e in _chain(error):
        if any(r in str(e) for r in _REFUSALS):
            return True
        name = getattr(e, "sqlite_errorname", None)
        if name and not name.startswith(_SQLITE_WAIT):
            return True
        if getattr(e, "sqlstate", None) in _POSTGRES_PERMANENT:
            return True
    return False


def transient(error: BaseException) -> bool:
    """True when the error means the database is unreachable (down, restarting, the
    connection dropped or timed out, a statement cancelled at its timeout), so that the
    same call may succeed later. A ``permanent`` error is not transient."""
    if permanent(error):
        return False
    for e in _chain(error):
        if isinstance(e, sqlalchemy.exc.DBAPIError) and e.connection_invalidated:
            return True
        if isinstance(e, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError,
                          sqlalchemy.exc.DisconnectionError, sqlalchemy.exc.TimeoutError)):
            return True
        if type(e).__module__.startswith("psycopg") and type(e).__name__ in (
                "OperationalError", "InterfaceError", "AdminShutdown", "CannotConnectNow"):
            return True
        if isinstance(e, (ConnectionError, TimeoutError)):
            return True
    return False


def is_storage_error(error: BaseException) -> bool:
    """True for errors raised by the database layer (to translate), not by Optuna's logic."""
    for e in _chain(error):
        if isinstance(e, sqlalchemy.exc.SQLAlchemyError) or type(e).__module__.startswith(
                "psycopg"):
            return True
    return False


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Text without passwords: any ``user:password@`` and ``password=...`` is masked, and
    so is each of ``secrets`` (e.g. the storage URL's own password)."""
    text = _CREDENTIALS.sub(r"\1***\2", text)
    text = _PASSWORD_WORD.sub(r"\1***", text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def reason(error: BaseException, secrets: tuple[str, ...] = ()) -> str:
    """One line saying why: the driver's own message when there is one, passwords masked."""
    for e in _chain(error):
        orig = getattr(e, "orig", None)
        if orig is not None:
            error = orig
            break
        if type(e).__module__.startswith("psycopg"):
            error = e
            break
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return scrub(lines[0] if lines else type(error).__name__, secrets)


def _password(url: str | None) -> tuple[str, ...]:
    if not url:
        return ()
    try:
        return (sqlalchemy.engine.make_url(url).password or "",)
    except Exception:
        return ()


def _say(text: str) -> None:
    log.warning(text)


def retrying(call: Callable[[], T], *, url: str | None = None, budget: float | None = None,
             say: Callable[[str], None] = _say, sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic,
             give_up: Callable[[], bool] | None = None) -> T:
    """``call()``, repeated with backoff while the database is unreachable.

    Returns what ``call`` returns. Raises ``StorageUnreachable`` when the outage outlasts
    ``budget`` seconds (default ``budget_s()``), or at once when ``give_up()`` says so
    (the caller was asked to stop), ``StorageError`` for any other database error; other
    exceptions (Optuna's own, the caller's) pass through unchanged.
    """
    budget = budget_s() if budget is None else budget
    secrets = _password(url)
    deadline = clock() + budget
    backoff = waits()
    while True:
        try:
            return call()
        except Exception as e:
            if not is_storage_error(e) and not transient(e):
                raise
            why = reason(e, secrets)
            if not transient(e):
                raise StorageError(f"storage error: {why}") from e
            wait = min(next(backoff), max(0.0, deadline - clock()))
            if wait <= 0:
                raise StorageUnreachable(
                    f"storage unreachable for {budget:.0f} s, giving up: {why}") from e
            if give_up is not None and give_up():
                raise StorageUnreachable(f"storage unreachable, not waiting: {why}") from e
            say(f"storage unreachable, retrying in {wait:.0f} s: {why}")
            sleep(wait)

"""Storage fixtures: a fresh SQLite file or a fresh PostgreSQL database per use.

PostgreSQL comes from ``TUNER_TEST_PG`` (default: the machine's server at
127.0.0.1:5432, user postgres, database test); each call creates its own database
``tuner_<random>`` there and drops it afterwards, so tests never share state.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy
from sqlalchemy.engine import make_url

from tuner.settings import settings

ADMIN_URL = settings().test_pg


def postgres_reachable(url: str = ADMIN_URL) -> str | None:
    """None when the server answers, else the reason it does not."""
    try:
        engine = sqlalchemy.create_engine(url, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("select 1"))
        engine.dispose()
        return None
    except Exception as e:  # any failure means "not usable"
        return str(e).splitlines()[0]


@contextlib.contextmanager
def fresh_postgres(url: str = ADMIN_URL) -> Iterator[str]:
    """A new, empty database on the server; yields its URL and drops it afterwards."""
    name = f"tuner_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :n AND pid <> pg_backend_pid()"), {"n": name})
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


def sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'tuner.db'}"

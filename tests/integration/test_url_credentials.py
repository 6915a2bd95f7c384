"""Issue 47 case 3: a password in a URL's query (``?password=``, ``?sslpassword=``) was
printed by `study create`, the worker's first line and `launch`, and written to the
worker's log. Real `tuner` processes on a real PostgreSQL database, reached through a URL
that carries a secret in every place libpq takes one: none of them is printed or logged.
``mask`` itself is checked on the other forms SQLAlchemy's drivers accept."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tuner.storage.database import mask
from tuner.testing.worker_procs import wait_for
from tuner.testing.cli_fork import run_tuner

STUDIES = Path(__file__).resolve().parents[2] / "studies"
SECRETS = ("UserInfoSecret1", "QuerySecret2", "SslSecret3")


def _tuner(*args, home: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_tuner(args, timeout=timeout, env={**os.environ, "TUNER_HOME": str(home)})


def test_no_password_of_the_url_is_printed_or_logged(pg_admin, tmp_path):
    from tuner.testing.databases import fresh_postgres

    shutil.copytree(STUDIES / "models", tmp_path / "models")
    text = (STUDIES / "demo-sim.toml").read_text()
    (tmp_path / "demo-sim.toml").write_text(text.replace("n_trials = 16", "n_trials = 1")
                                     .replace("num_requests = 256", "num_requests = 16"))
    home = tmp_path / "home"
    with fresh_postgres() as plain:
        base, db = plain.rsplit("/", 1)
        url = (base.replace("postgres@", f"postgres:{SECRETS[0]}@") + f"/{db}?password="
               f"{SECRETS[1]}&sslpassword={SECRETS[2]}&application_name=tuner-test")
        printed = []
        for args in (("study", "create", tmp_path / "demo-sim.toml"), ("study", "list"),
                     ("worker", "demo-sim", "--gpus", "0"),
                     ("launch", "demo-sim", "--gpus", "1")):
            out = _tuner(*args, "--storage", url, home=home)
            assert out.returncode == 0, (args, out.stderr)
            printed.append(out.stdout + out.stderr)
        log = home / "studies" / "demo-sim" / "workers" / "gpu1.log"
        assert wait_for(lambda: log.is_file() and "worker done" in log.read_text(), 300), \
            log.read_text() if log.is_file() else "no log"
        printed.append(log.read_text())
    words = "\n".join(printed)
    assert "password=***" in words and "sslpassword=***" in words and ":***@" in words
    assert "application_name=tuner-test" in words  # the rest of the query is still shown
    assert [s for s in SECRETS if s in words] == [], words


@pytest.mark.parametrize("url,secret", [
    ("postgresql+psycopg://u:p%40ss@h/db", "p%40ss"),
    ("postgresql+psycopg://u@h/db?password=s3cret", "s3cret"),
    ("postgresql+psycopg://u@h/db?sslpassword=s3cret&sslmode=require", "s3cret"),
    ("postgresql+psycopg:///db?host=/run/pg&user=u&password=s3cret", "s3cret"),
    ("postgresql+psycopg://u@h/db?password=a&password=s3cret", "s3cret"),
    ("mysql+pymysql://u@h/db?passwd=s3cret", "s3cret"),
    ("mysql+mysqldb://u:s3cret@h/db?charset=utf8mb4", "s3cret"),
    ("mssql+pyodbc:///?odbc_connect=DRIVER%3D%7Bx%7D%3BUID%3Du%3BPWD%3Ds3cret", "s3cret"),
    ("postgresql+psycopg2:///?dsn=host%3Dh+password%3Ds3cret", "s3cret"),
    ("sqlite+pysqlcipher://:s3cret@/file.db?cipher=aes-256-cfb", "s3cret"),
    ("snowflake://u@acct/db?token=s3cret", "s3cret"),
    ("no scheme u:pw@ ?password=s3cret&sslpassword=s3cret", "s3cret"),
    ("postgresql://u:s3cret@h:notaport/db", "s3cret"),
])
def test_mask_hides_each_credential_form(url, secret):
    assert secret not in mask(url) and "***" in mask(url)

"""A database that accepts connections and never answers (issue 47, case 4): a real
listener on loopback as the PostgreSQL server, real `tuner` processes. Each command ends
with one line in bounded time; a worker whose database goes silent counts it as an outage
and still ends within seconds on SIGTERM."""

import os
import signal
import time

import pytest
from sqlalchemy.engine import make_url

from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.databases import fresh_postgres
from tuner.testing.silent_db import SilentDatabase
from tuner.testing.worker_procs import start_worker, wait_for
from tuner.testing.cli_fork import run_tuner

# Generous: the tests share two cores with other work; without the fix they never end.
ENDS_WITHIN_S = 120
FAST = {"TUNER_STORAGE_CONNECT_TIMEOUT_S": "2", "TUNER_HEARTBEAT_S": "2"}

STUDY = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 256
output_len = 32
max_concurrency = 16
num_requests = {n}
warmup_requests = 2
max_client_lag_ms = 50
min_gap_share = 0.5
[slo]
p99_itl_ms = 200
[search]
n_trials = 4
[engine]
kind = "sim"
time_scale = 1
start_timeout_s = 30
'''


def _tuner(*args, env=None):
    return run_tuner(args, timeout=ENDS_WITHIN_S, env={**os.environ, **FAST, **(env or {})})


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def test_commands_on_a_silent_database_end_with_one_line(study_file, tmp_path):
    path = study_file(STUDY.format(n=40), "s.toml")
    with SilentDatabase() as db:
        url = f"postgresql+psycopg://tuner:s3cret@127.0.0.1:{db.port}/tuner"
        for args in (("study", "create", path), ("status", "s", "--once"),
                     ("worker", "s")):
            done = _tuner(*args, "--storage", url, env={"TUNER_HOME": str(tmp_path)})
            assert done.returncode == 1, (args, done.stderr[-3000:])
            line = _one_line(done.stderr)
            assert "timeout" in line and "s3cret" not in line, line


def _phase(url, name):
    for key, info in open_study(name, url).study.user_attrs.items():
        if key.startswith("tuner.worker.") and info.get("state") == "running":
            return info.get("phase")
    return None


@pytest.mark.slow
def test_worker_whose_database_goes_silent_waits_as_in_an_outage_and_stops_on_sigterm(
        pg_admin, study_file, tmp_path):
    log = tmp_path / "worker.log"
    with fresh_postgres() as url, SilentDatabase(
            (make_url(url).host, make_url(url).port)) as db:
        create_study(load_study_file(study_file(STUDY.format(n=300), "s.toml")), url)
        proc = start_worker("s", db.url_for(url), "0", log=log,
                            env={"TUNER_HOME": str(tmp_path), **FAST})
        try:
            assert wait_for(lambda: _phase(url, "s") == "benchmark", ENDS_WITHIN_S), (
                log.read_text()[-3000:])
            db.silence()  # mid-trial: the worker measures on, then cannot tell
            assert wait_for(lambda: "storage unreachable, retrying in" in log.read_text(),
                            ENDS_WITHIN_S), log.read_text()[-3000:]
            signalled = time.monotonic()
            os.kill(proc.pid, signal.SIGTERM)
            code = proc.wait(timeout=ENDS_WITHIN_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    print(f"worker ended {time.monotonic() - signalled:.1f} s after SIGTERM")

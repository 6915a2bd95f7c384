"""Seen case 3 of issue 20: the database password reached every engine process. An
engine's environment is now built from an allow-list: read from the running server's
/proc/<pid>/environ while a real `tuner worker` (its storage URL with a password in a file)
runs a simulated server on real PostgreSQL. The simulator takes no engine.env (issue 47), so
the study runs it as a vLLM-kind command on the worker's allow-list."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tuner.engine import proctree
from tuner.storage import create_study, load_study_file
from tuner.testing.databases import fresh_postgres
from tuner.testing.worker_procs import interrupt, wait_for

PASSWORD = "pw-4b1c9e"
SECRETS = {"AWS_SECRET_ACCESS_KEY": "aws-7f3a", "PGPASSWORD": "pg-91ad", "HF_TOKEN": "hf-23cd",
           "MY_SERVICE_API_KEY": "api-5e0f"}

COMMAND = [sys.executable, "-m", "tuner.sim", "serve", "--gpu", "h100"]
STUDY = f'''
[model]
path = "models/llama3-8b"
[workload]
input_len = 64
output_len = 8
max_concurrency = 4
num_requests = 2000
warmup_requests = 0
max_client_lag_ms = 1000
[search]
n_trials = 1
baselines = false
[engine]
command = {json.dumps(COMMAND)}
start_timeout_s = 60
env = {{ VLLM_STUDY_SETTING = "kept" }}
'''


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def _server(worker: int) -> int | None:
    return next((p for p in proctree.descendants(worker)
                 if "serve" in proctree.cmdline(p)), None)


@pytest.fixture
def pg_with_password(pg_admin):
    with fresh_postgres() as url:  # trust auth here: any password is accepted
        yield make_url(url).set(password=PASSWORD).render_as_string(hide_password=False)


def test_no_credential_reaches_the_engine_process(pg_with_password, study_file, tmp_path):
    url = pg_with_password
    create_study(load_study_file(study_file(STUDY, "env.toml")), url)
    (tmp_path / "url").write_text(url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_STORAGE")}
    env.update(SECRETS, TUNER_STORAGE_FILE=str(tmp_path / "url"), TUNER_HOME=str(tmp_path),
               PATH=os.environ["PATH"], TUNER_ALLOWED_ENGINES=shlex.join(COMMAND))
    # a worker, not `tuner launch`: launch asks nvidia-smi about GPUs for a vLLM-kind engine
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tuner", "worker", "env", "--gpus", "0"],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    worker = proc.pid
    try:
        server = wait_for(lambda: _server(worker), 120)
        assert server, "no server started"
        child = environ(server)
        assert child["VLLM_STUDY_SETTING"] == "kept" and child["CUDA_VISIBLE_DEVICES"] == "0"
        assert child["PATH"] == os.environ["PATH"] and "HOME" in child
        assert not [k for k in child if k.startswith("TUNER_STORAGE")]
        leaked = [k for k, v in child.items() if PASSWORD in v or v in SECRETS.values()]
        assert leaked == [] and not set(SECRETS) & set(child)
        # The worker itself reads the URL from the file, not from its environment.
        assert not [k for k, v in environ(worker).items() if PASSWORD in v]
    finally:
        try:  # a worker that outlives SIGTERM fails the test with its stacks and log tail
            interrupt(proc, signal.SIGTERM, log=log)
        finally:
            if proc.poll() is None:
                proc.kill()

"""`tuner api` over real HTTP on loopback, as a real subprocess, against stored studies on
SQLite and PostgreSQL (and one a simulated worker is writing to)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import optuna

from tuner.cli.results import load_summary
from tuner.trials import queries
from tuner.testing.studies import make_study
from tuner.testing.api_procs import api_process
from tuner.testing.worker_procs import start_worker


def get(url: str, token: str | None = None) -> tuple[int, str, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}
                                 if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def test_best_flags_equal_tuner_best(storage_url, tmp_path, run_cli):
    name = make_study(storage_url, "mixed").spec.name
    with api_process(storage_url, tmp_path / "api.log") as base:
        for query, flags in ((dict(format="cli"), ["--format", "cli"]),
                             (dict(format="yaml"), ["--format", "yaml"]),
                             (dict(format="json", prefer="latency"),
                              ["--format", "json", "--prefer", "latency"]),
                             (dict(format="cli", max_itl_p99="140", max_ttft_p99="2900"),
                              ["--max-itl-p99", "140", "--max-ttft-p99", "2900"])):
            code, out, _ = run_cli("best", name, "--storage", storage_url, *flags)
            assert code == 0
            qs = "&".join(f"{k}={v}" for k, v in query.items())
            status, ctype, body = get(f"{base}/studies/{name}/best?{qs}")
            assert status == 200 and body == out, (query, body)
            assert ("json" in ctype) == (query["format"] == "json")

        status, _, body = get(f"{base}/studies/{name}/best?max_itl_p99=1")
        assert status == 422 and "meets" in json.loads(body)["error"]

        status, _, body = get(f"{base}/studies/{name}/pareto")
        front = json.loads(body)["front"]
        expected = [r.record.number for r in load_summary(name, storage_url).front]
        assert status == 200 and [r["trial"] for r in front] == expected and expected

        status, _, body = get(f"{base}/studies/{name}")
        st = json.loads(body)
        assert status == 200 and st["counts"]["measured"] > 0 and st["front_size"] == len(front)
        status, _, body = get(f"{base}/studies")
        assert status == 200 and [s["study"] for s in json.loads(body)["studies"]] == [name]

        status, ctype, body = get(f"{base}/studies/no-such-study")
        assert status == 404 and "json" in ctype and "no-such-study" in json.loads(body)["error"]
        status, ctype, body = get(f"{base}/studies/no-such-study/best")
        assert status == 404 and json.loads(body)["error"]


def test_a_configured_token_is_required(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    name = make_study(url, "mixed", n=5).spec.name
    token = "s3cret-token-of-16+"  # at least 16 characters (test_api_edges.py)
    with api_process(url, tmp_path / "api.log", token=token) as base:
        for wrong in (None, "wrong", token + "-and-more", token[:-1]):
            status, ctype, body = get(f"{base}/studies/{name}", wrong)
            assert status == 401 and "json" in ctype and "token" in json.loads(body)["error"]
        status, _, body = get(f"{base}/studies/{name}", token)
        assert status == 200 and json.loads(body)["study"] == name


def test_refuses_a_non_loopback_address_without_a_token(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TUNER_API_TOKEN"}
    out = subprocess.run([sys.executable, "-m", "tuner", "api", "--host", "0.0.0.0",
                          "--storage", f"sqlite:///{tmp_path}/t.db"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "tuner: error: refusing to listen on 0.0.0.0 without a token: set TUNER_API_TOKEN "
        "or --token-file, or listen on 127.0.0.1"]


SIM = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 128
output_len = 16
max_concurrency = 8
num_requests = 24
warmup_requests = 0
max_client_lag_ms = 10000
min_gap_share = 0.0
[search]
n_trials = 4
[engine]
kind = "sim"
time_scale = 10
start_timeout_s = 30
'''


def test_answers_while_a_worker_writes_to_the_study(study_file, tmp_path, run_cli):
    url = f"sqlite:///{tmp_path}/t.db"
    assert run_cli("study", "create", study_file(SIM, "live.toml"), "--storage", url)[0] == 0
    with api_process(url, tmp_path / "api.log") as base:
        worker = start_worker("live", url, "0", env={"TUNER_HOME": str(tmp_path)},
                              log=tmp_path / "worker.log")
        seen, answers = set(), 0
        while worker.poll() is None:
            status, _, body = get(f"{base}/studies/live")
            assert status == 200, body
            st = json.loads(body)
            seen.add((st["counted"], st["live_workers"]))
            answers += 1
            time.sleep(0.2)
        assert worker.returncode == 0, (tmp_path / "worker.log").read_text()[-2000:]
        status, _, body = get(f"{base}/studies/live")
        # The final answer is the stored study's. (Not the most seen: a running trial counts,
        # and one that then fails as an invalid measurement no longer does.)
        stored = queries.counted(queries.load_records(optuna.load_study(study_name="live",
                                                                        storage=url)))
        assert status == 200 and json.loads(body)["counted"] == stored, body
    assert answers >= 10
    # It saw the study grow while the worker wrote. How many of the four
    # counts a poll catches depends on the machine's load, so two suffice.
    assert len({c for c, _ in seen}) >= 2, seen
    assert any(live == 1 for _, live in seen)

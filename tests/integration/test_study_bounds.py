"""Seen case 6 of issue 47: workload sizes had no upper bound. A study with num_requests or
max_concurrency of 10**12 was accepted, and the worker that ran it grew past 5 GB or died of
MemoryError; inf was taken for an SLO or the simulator's time scale. Study files come from
the shared database, so every numeric field is bounded (tuner/limits.py) and every float is
finite: `study create` refuses with exit 2 and one line naming the key, and a stored study
that was given such a value behind the schema's back is refused when a worker opens it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import optuna
import pytest

from tuner.storage import create_study, load_study_file
from tuner.storage.studies import SPEC

BASE = '''
[model]
path = "models/llama3-8b"
[search]
baselines = false
[engine]
kind = "sim"
'''

BAD = [  # (a section's text, the key the one line names, the value it shows)
    ("[workload]\nnum_requests = 1_000_000_000_000", "workload.num_requests", "1000000000000"),
    ("[workload]\nmax_concurrency = 1_000_000_000_000", "workload.max_concurrency",
     "1000000000000"),
    ("[workload]\nwarmup_requests = 1_000_000_000_000", "workload.warmup_requests", ""),
    ("[workload]\ninput_len = 1_000_000_000_000", "workload.input_len", ""),
    ("[workload]\noutput_len = 1_000_000_000_000", "workload.output_len", ""),
    ('[workload]\nkind = "multi-turn"\nturns = 1_000_000_000', "workload.turns", ""),
    ("[workload]\nrequest_rate = 1e300", "workload.request_rate", ""),
    ("[workload]\nrequest_rate = nan", "workload.request_rate", "nan"),
    ("[workload]\nmax_client_lag_ms = inf", "workload.max_client_lag_ms", "inf"),
    ("[workload]\nseed = -1", "workload.seed", "-1"),
    ("[slo]\np99_itl_ms = inf", "slo.p99_itl_ms", "inf"),
    ("[slo]\np99_ttft_ms = nan", "slo.p99_ttft_ms", "nan"),
    ("[slo]\nmin_output_throughput = inf", "slo.min_output_throughput", "inf"),
    ("[measurement]\nmax_requests = 1_000_000_000_000", "measurement.max_requests", ""),
    ("[measurement]\nitl_ci = inf", "measurement.itl_ci", "inf"),
    ("[model]\ncontext_len = 1_000_000_000_000", "model.context_len", ""),
    ("[search]\nn_trials = 1_000_000_000_000", "search.n_trials", ""),
    ("[search]\nseed = 1_000_000_000_000", "search.seed", ""),
    ('[[objectives]]\nmetric = "output_throughput"\ndirection = "maximize"\nworst = nan',
     "objectives.0.worst", "nan"),
    ("[engine]\ntime_scale = inf", "engine.time_scale", "inf"),
    ("[engine]\nbenchmark_timeout_s = inf", "engine.benchmark_timeout_s", "inf"),
    ("[engine]\nstart_timeout_s = 1e12", "engine.start_timeout_s", ""),
]


def _study_text(section: str) -> str:
    """BASE with ``section`` merged in (TOML allows each table once)."""
    table = section.split("\n", 1)[0]
    if table in BASE:
        return BASE.replace(table, section, 1)
    return BASE + section + "\n"


@pytest.mark.parametrize("section,key,shown", BAD, ids=[k for _, k, _ in BAD])
def test_study_create_refuses_a_huge_or_infinite_value(section, key, shown, study_file,
                                                        run_cli, tmp_path):
    path = study_file(_study_text(section), "big.toml")
    url = f"sqlite:///{tmp_path}/x.db"
    code, out, err = run_cli("study", "create", path, "--storage", url)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert f"key '{key}'" in lines[0] and shown in lines[0], lines[0]
    assert "Traceback" not in err and out == ""
    assert optuna.get_all_study_summaries(url) == []


def _limited() -> None:
    """The worker's address space, capped: a worker that allocates for 10**12 requests
    dies here instead of taking the test machine's memory."""
    cap = 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def worker(name: str, url: str, home) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-m", "tuner", "worker", name, "--storage", url,
                          "--gpus", "0"], capture_output=True, text=True, timeout=300,
                         preexec_fn=_limited, env={**os.environ, "TUNER_HOME": str(home)})
    return out.returncode, out.stderr.strip().splitlines()


@pytest.mark.parametrize("section,field,value", [
    ("workload", "num_requests", 10**12),
    ("workload", "max_concurrency", 10**12),
    ("slo", "p99_itl_ms", float("inf")),
    ("engine", "time_scale", float("inf")),
])
def test_a_stored_study_with_a_huge_value_is_refused_by_the_worker(
        section, field, value, storage_url, study_file, tmp_path):
    create_study(load_study_file(study_file(BASE, "s.toml")), storage_url)
    study = optuna.load_study(study_name="s", storage=storage_url)
    spec = dict(study.user_attrs[SPEC])
    spec[section] = {**spec[section], field: value}  # as anyone who can write the database
    study.set_user_attr(SPEC, spec)
    code, lines = worker("s", storage_url, tmp_path)
    assert code == 2 and len(lines) == 1, lines
    assert "stored study s" in lines[0] and f"key '{section}.{field}'" in lines[0], lines
    assert optuna.load_study(study_name="s", storage=storage_url).get_trials() == []

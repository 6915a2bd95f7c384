"""Simulator studies for tests that run real `tuner worker` processes.

``SIM`` is a study file's text with ``{n}`` (requests), ``{trials}`` and ``{scale}`` (the
simulator's time scale) left to fill in; ``sim_study`` writes, loads and creates one.
``trials_of`` reads a study's trials; ``running_phase`` finds the worker (as published by
its heartbeat) that is in a given phase of a trial.

A test that does not measure timing may run the simulator many times faster than real
time (``scale``): the load generator converts what it measures back to simulated time.
"""

from __future__ import annotations

from tuner.storage import create_study, load_study_file, open_study

SIM = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 256
output_len = 32
max_concurrency = 16
num_requests = {n}
warmup_requests = 2
# tests share two cores with the simulated server: judge the client's lag loosely here,
# and the share of inter-token gaps it saw (a late read finds several tokens at once)
max_client_lag_ms = 50
min_gap_share = 0.5
[slo]
p99_itl_ms = 200
[search]
n_trials = {trials}
[engine]
kind = "sim"
time_scale = {scale}
start_timeout_s = 30
'''


def sim_study(study_file, storage_url: str, name: str = "w", n: int = 48, trials: int = 5,
              scale: float = 1, extra: str = ""):
    """Create study ``name`` from ``SIM`` (``study_file`` is the conftest fixture that
    writes a study file next to the model shapes); returns its spec."""
    path = study_file(SIM.format(n=n, trials=trials, scale=scale) + extra, f"{name}.toml")
    spec = load_study_file(path)
    create_study(spec, storage_url)
    return spec


def trials_of(name: str, url: str):
    return open_study(name, url).study.get_trials(deepcopy=False)


def running_phase(url: str, name: str, phase: str = "benchmark") -> dict | None:
    """The published state of a worker of study ``name`` now in ``phase``, else None."""
    study = open_study(name, url).study
    for key, info in study.user_attrs.items():
        if key.startswith("tuner.worker.") and info.get("phase") == phase:
            return info
    return None

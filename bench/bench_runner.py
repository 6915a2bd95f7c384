"""The tuner's own overhead per trial, on the simulator (goal: under 2 % of a trial's wall
time), and, from the H200 run, the seconds from the end of a benchmark until the GPU's
memory was free again (goal: under 10 s).

    .venv/bin/python bench/bench_runner.py          # writes bench/results/runner.json

Overhead is everything a trial's wall time holds beyond the server's start, the benchmark,
the cross-check, the server's stop and the wait for the GPU: asking the sampler, the rules,
the duplicate check, writing the trial and the worker's bookkeeping (``phases.overhead``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import optuna  # noqa: E402

from tuner.trials import load_records  # noqa: E402

STUDY = """
[model]
path = "{root}/studies/models/llama3-8b"
[workload]
input_len = 512
output_len = 64
max_concurrency = 16
num_requests = 96
warmup_requests = 4
max_client_lag_ms = 50
[search]
n_trials = 8
[engine]
kind = "sim"
"""


def sim_overhead() -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        path = Path(tmp, "bench-runner.toml")
        path.write_text(STUDY.format(root=ROOT))
        url = f"sqlite:///{tmp}/t.db"
        env = {**os.environ, "TUNER_HOME": tmp}
        tuner = [sys.executable, "-m", "tuner"]
        subprocess.run(tuner + ["study", "create", str(path), "--storage", url], check=True,
                       env=env, capture_output=True)
        subprocess.run(tuner + ["worker", "bench-runner", "--storage", url], check=True,
                       env=env, capture_output=True)
        study = optuna.load_study(study_name="bench-runner", storage=url)
        phases = [r.phases for r in load_records(study) if r.phases]
    shares = [p["overhead"] / p["total"] for p in phases]
    return {"trials": len(phases), "overhead_s_median": statistics.median(
        p["overhead"] for p in phases), "trial_s_median": statistics.median(
        p["total"] for p in phases), "overhead_share_median": statistics.median(shares),
        "overhead_share_max": max(shares)}


def gpu_release() -> dict:
    data = json.loads((ROOT / "results" / "h200" / "trials.json").read_text())
    stops = [(d["phases"]["stop"], d["phases"].get("gpu_release", 0.0))
             for d in data if d.get("phases") and "stop" in d["phases"]]
    return {"source": "results/h200/trials.json (NVIDIA H200, vLLM 0.24.0)",
            "trials": len(stops), "stop_s": [round(s, 2) for s, _ in stops],
            "gpu_free_after_stop_s": [round(g, 2) for _, g in stops],
            "end_of_benchmark_to_gpu_free_s_max": round(max(s + g for s, g in stops), 2)}


def main() -> int:
    result = {"simulator": sim_overhead(), "h200": gpu_release()}
    out = ROOT / "bench" / "results" / "runner.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    s, g = result["simulator"], result["h200"]
    print(f"runner overhead on the simulator: median {s['overhead_s_median'] * 1000:.0f} ms "
          f"per trial of {s['trial_s_median']:.1f} s = {s['overhead_share_median']:.2%} "
          f"(max {s['overhead_share_max']:.2%}; goal < 2 %)")
    print(f"H200: end of benchmark to GPU memory free: at most "
          f"{g['end_of_benchmark_to_gpu_free_s_max']:.1f} s over {g['trials']} trials "
          "(goal < 10 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

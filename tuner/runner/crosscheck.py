"""Cross-checking a trial's measurement with vLLM's own benchmark on the same server.

With ``engine.crosscheck_trials = N`` a worker's first N launched trials also run
`vllm bench serve` (random prompts of the study's lengths, the same request count and
concurrency, ignore_eos) right after our load generator, before the server stops; its
figures are stored beside ours (user attribute ``vllm_bench``) so the two can be compared
on the same runs. Only for the random workload on /v1/completions. With the early stop our
run's length varies; vLLM's then sends as many requests as our run right before it (the
last confirmation run, else the first) completed, since whole-run figures depend on the
share of the run spent in the ramp and the drain, and that run is the one it is compared
with (``TrialRecord.last_run``; the first run on a fresh server reads apart,
docs/loadgen.md).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tuner.study.spec import StudySpec
from tuner.trials.record import TrialRecord

# Enough of `vllm bench serve`'s stderr to hold its traceback's end, small enough to store.
STDERR_TAIL_CHARS = 1500

KEYS = ("output_throughput", "request_throughput", "total_token_throughput", "completed",
        "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms",
        "p99_itl_ms", "median_tpot_ms", "median_e2el_ms", "duration")


def applicable(spec: StudySpec) -> bool:
    return (spec.engine.kind == "vllm" and spec.workload.kind == "random"
            and spec.workload.endpoint == "completions")


def num_prompts(told: TrialRecord) -> int | None:
    """How many requests vLLM's run sends: as many as our run right before it completed
    (None: the study's count)."""
    sent = told.last_run.get("completed")
    return int(sent) if sent else None


def command(spec: StudySpec, url: str, model: str, result_dir: Path,
            num_prompts: int | None = None) -> list[str]:
    w = spec.workload
    cmd = [spec.engine.python, "-m", "vllm.entrypoints.cli.main", "bench", "serve",
           "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
           "--model", model, "--tokenizer", spec.model.path, "--dataset-name", "random",
           "--random-input-len", str(w.input_len), "--random-output-len", str(w.output_len),
           "--random-range-ratio", str(w.range_ratio),
           "--num-prompts", str(num_prompts or w.num_requests),
           "--ignore-eos", "--num-warmups", str(w.warmup_requests), "--seed", str(w.seed),
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
           "--save-result", "--result-dir", str(result_dir), "--result-filename", "r.json",
           "--disable-tqdm"]
    if w.max_concurrency:
        cmd += ["--max-concurrency", str(w.max_concurrency)]
    return cmd


def run(spec: StudySpec, url: str, model: str, env: dict[str, str],
        num_prompts: int | None = None) -> dict[str, Any]:
    """vLLM's figures for the same workload (``num_prompts`` requests, else the study's
    count), or {"error": ...}; never raises."""
    with tempfile.TemporaryDirectory(prefix="tuner-crosscheck-") as tmp:
        cmd = command(spec, url, model, Path(tmp), num_prompts)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                               timeout=spec.engine.benchmark_timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"error": f"vllm bench serve did not run: {e}"}
        if p.returncode != 0:
            return {"error": f"vllm bench serve exited {p.returncode}: {p.stderr[-STDERR_TAIL_CHARS:]}"}
        data = json.loads((Path(tmp) / "r.json").read_text())
    return {k: data[k] for k in KEYS if k in data}

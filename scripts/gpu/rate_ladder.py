"""Real latency-vs-load curves on the GPU machine (issue 49, part 1): for each named
configuration, one `vllm serve` start, a discarded warm-up run, then `vllm bench serve`
with Poisson arrivals at each request rate, light load to saturation.

    python3 scripts/gpu/rate_ladder.py MODEL_DIR OUT_DIR CONFIG [CONFIG ...]

Run with the kit's environment (``source scripts/gpu/env.sh``) and the machine's Python.
CONFIG is ``name`` from ``CONFIGS`` below. Writes into OUT_DIR, per configuration:
``NAME.log`` (the server's log), ``NAME-rate-R.json`` (vLLM's result with per-request
TTFTs and ITLs: ``--save-detailed``), ``NAME-summary.json`` and ``ladder.json`` (the
summaries, rewritten after each rate, so a call cut short keeps what it measured).
Workload: random 1024 in / 128 out tokens, ``--ignore-eos``, one seed per rate.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from start_profile import healthy  # this folder, first on sys.path when run as a file

SERVER = "vllm.entrypoints.openai.api_server"
CONFIGS = {
    # vLLM 0.24's defaults on an 80 GB card: chunked prefill, budget 8192 (the probe's).
    "default": [],
    "chunked-256": ["--max-num-batched-tokens", "256"],
    "chunked-512": ["--max-num-batched-tokens", "512"],
    "chunked-1024": ["--max-num-batched-tokens", "1024"],
    "chunked-2048": ["--max-num-batched-tokens", "2048"],
    "nonchunked-8192": ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192",
                        "--max-model-len", "8192"],
}
# Requests a second offered; the last is vLLM's "inf" (all at once: the saturated point).
RATES = (3.0, 9.0, 15.0, 21.0, float("inf"))
SECONDS_A_RATE = 15          # requests = rate x this (at least MIN_PROMPTS)
MIN_PROMPTS, SATURATED_PROMPTS = 60, 512
WARMUP_PROMPTS = 128
START_TIMEOUT_S = 600


def bench(model: str, port: int, rate: float, prompts: int, seed: int, out: Path,
          name: str) -> dict:
    """One `vllm bench serve` run, in this process: vLLM's benchmark module is imported
    once (the first call, while the server starts) rather than in a fresh process per run,
    which paid vLLM's and torch's imports every time."""
    from vllm.benchmarks.serve import add_cli_args, main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    argv = ["--backend", "openai", "--base-url", f"http://127.0.0.1:{port}",
            "--endpoint", "/v1/completions", "--model", "m", "--tokenizer", model,
            "--dataset-name", "random", "--random-input-len", "1024",
            "--random-output-len", "128", "--ignore-eos", "--num-prompts", str(prompts),
            "--request-rate", str(rate), "--seed", str(seed),
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
            "--save-result", "--save-detailed", "--result-dir", str(out),
            "--result-filename", name, "--disable-tqdm"]
    t0 = time.monotonic()
    try:
        bench_main(parser.parse_args(argv))
    except Exception as exc:  # one failed level is recorded, the ladder goes on
        return {"error": repr(exc)[-800:], "wall_s": round(time.monotonic() - t0, 1)}
    data = json.loads((out / name).read_text())
    keep = ("request_rate", "completed", "duration", "request_throughput",
            "output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms",
            "p99_itl_ms", "median_tpot_ms", "p99_tpot_ms", "p99_e2el_ms")
    return {**{k: data.get(k) for k in keep}, "wall_s": round(time.monotonic() - t0, 1)}


def _import_bench() -> None:
    import vllm.benchmarks.serve  # noqa: F401  (imported while the server starts)


def ladder(py: str, model: str, out: Path, name: str, port: int, summary: dict) -> None:
    log = open(out / f"{name}.log", "w")
    argv = [py, "-m", SERVER, "--model", model, "--served-model-name", "m",
            "--load-format", "dummy", "--port", str(port), *CONFIGS[name]]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, env=dict(os.environ))
    entry = summary.setdefault(name, {"flags": CONFIGS[name], "levels": []})
    entry["levels"] = []
    try:
        _import_bench()
        while not healthy(port):
            if proc.poll() is not None or time.monotonic() - t0 > START_TIMEOUT_S:
                entry["error"] = f"no healthy server (exit {proc.poll()})"
                return
            time.sleep(0.5)
        entry["healthy_s"] = round(time.monotonic() - t0, 1)
        entry["warmup"] = bench(model, port, float("inf"), WARMUP_PROMPTS, 1, out,
                                f"{name}-warmup.json")
        for k, rate in enumerate(RATES):
            prompts = (SATURATED_PROMPTS if rate == float("inf")
                       else max(MIN_PROMPTS, int(rate * SECONDS_A_RATE)))
            level = bench(model, port, rate, prompts, 100 + k, out,
                          f"{name}-rate-{rate:g}.json")
            entry["levels"].append({"offered_rate": rate, "prompts": prompts, **level})
            _write(out, name, summary)
            print(f"{name} rate {rate:g}: {level.get('output_throughput')} tok/s, p99 ITL "
                  f"{level.get('p99_itl_ms')} ms, p99 TTFT {level.get('p99_ttft_ms')} ms "
                  f"({level.get('wall_s')} s)", flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        _write(out, name, summary)


def _write(out: Path, name: str, summary: dict) -> None:
    """The summary as a whole (``ladder.json``) and this configuration's part alone in the
    form ``bench/sim_ladder_replay.py`` reads (``NAME-summary.json``: the card, vLLM's
    version, the flags, and each run's figures with its per-request file, which is gzipped
    where the results are committed): a call whose ``ladder.json`` does not come back keeps
    both."""
    (out / "ladder.json").write_text(json.dumps(summary, indent=1))
    entry = summary[name]
    runs = [({**entry["warmup"], "file": f"{name}-warmup.json.gz"} if "warmup" in entry
             else None),
            *({**lv, "file": f"{name}-rate-{lv['offered_rate']:g}.json.gz"}
              for lv in entry["levels"])]
    (out / f"{name}-summary.json").write_text(json.dumps({
        "gpu": _gpu_name(), "vllm": _vllm_version(), "config": name, "flags": entry["flags"],
        "healthy_s": entry.get("healthy_s"), "error": entry.get("error"),
        "levels": [r for r in runs if r is not None and "error" not in r]}, indent=1))


@functools.lru_cache(maxsize=1)
def _gpu_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


@functools.lru_cache(maxsize=1)
def _vllm_version() -> str:
    from importlib.metadata import version
    return version("vllm")


def main() -> int:
    model, out, names = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    unknown = [n for n in names if n not in CONFIGS]
    if not names or unknown:
        print(f"error: name configurations among {', '.join(CONFIGS)}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    path = out / "ladder.json"
    summary = json.loads(path.read_text()) if path.is_file() else {}
    for name in names:
        ladder(sys.executable, model, out, name, 8100, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())

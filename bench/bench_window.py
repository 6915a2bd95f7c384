"""Benchmark: does the steady window's interval hold what a second run of the same
configuration measures?

Starts `tuner sim serve` (H200, Llama-3-8B shape, vLLM defaults, real time), then runs the
load generator (``tuner.loadgen.run_benchmark``, closed loop) against it in pairs: two runs
of the same configuration on the same server, each with prompts of its own seed (the same
prompts again would be served from the prefix cache). For each pair it asks whether the second run's
steady-window output throughput lies inside the first run's reported 95 % interval (and the
other way round), and does the same for p99 ITL: once for the mean's interval, once for the
repeat-run interval (``repeat_half_width``, sqrt 2 wider), which is the one that claims to
hold a second run. The whole-run throughputs (vLLM's figures)
are reported beside them. Writes bench/results/window.json.

    .venv/bin/python bench/bench_window.py [--pairs 10] [--requests 400] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tuner.loadgen import LoadSpec, WorkloadSpec, run_benchmark

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import model_and_port, wait_ready  # noqa: E402

OUT = Path(__file__).with_name("results") / "window.json"


def one_run(url: str, model: str, args, seed: int) -> dict:
    # A new seed each run: the same prompts again would hit the server's prefix cache.
    workload = WorkloadSpec(kind="random", input_len=args.input_len, output_len=args.output_len,
                            vocab_size=128256, seed=seed)
    load = LoadSpec(max_concurrency=args.concurrency, num_requests=args.requests,
                    warmup_requests=16, max_client_lag_ms=50.0, early_stop=args.early_stop,
                    throughput_ci=0.02, itl_ci=0.10)
    r = asyncio.run(run_benchmark(url, model, workload, load, time_scale=args.time_scale))
    w = r.window or {}
    return {"output_throughput": r.metrics["output_throughput"],
            "p99_itl_ms": r.metrics["p99_itl_ms"], "completed": r.metrics["completed"],
            "window": w, "stop_reason": r.stop_reason, "valid": r.valid,
            "invalid_reason": r.invalid_reason}


def inside(run: dict, other: dict, key: str, half: str = "half_width") -> bool | None:
    """Whether ``other``'s window figure lies within ``run``'s interval: ``half_width`` (the
    mean's 95 % interval) or ``repeat_half_width`` (where a repeat run should fall)."""
    iv = run["window"].get(key)
    if not iv or not other["window"].get(key):
        return None
    return abs(other["window"][key]["value"] - iv["value"]) <= iv[half]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--early-stop", action="store_true")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="the simulator's speed against real time (< 1 leaves the CPU slack)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus = ["--sim-cpus", str(cpus[-1])] if len(cpus) >= 2 else []
    if server_cpus:
        os.sched_setaffinity(0, cpus[:-1])
    model_dir, port, url = model_and_port()
    proc = subprocess.Popen([sys.executable, "-m", "tuner.sim", "serve", "--model",
                             str(model_dir), "--port", str(port), "--gpu", "h200",
                             "--time-scale", str(args.time_scale), *server_cpus], stdout=subprocess.DEVNULL)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the server on the way out
    pairs = []
    try:
        asyncio.run(wait_ready(url, proc))
        for i in range(args.pairs):
            a = one_run(url, str(model_dir), args, 2 * i)
            b = one_run(url, str(model_dir), args, 2 * i + 1)
            pair = {"a": a, "b": b}
            for key in ("output_throughput", "p99_itl_ms"):
                pair[f"{key}_b_in_a"] = inside(a, b, key)
                pair[f"{key}_a_in_b"] = inside(b, a, key)
                pair[f"{key}_b_in_a_repeat"] = inside(a, b, key, "repeat_half_width")
                pair[f"{key}_a_in_b_repeat"] = inside(b, a, key, "repeat_half_width")
            pairs.append(pair)
            print(f"pair {i + 1}: window tok/s {a['window']['output_throughput']} vs "
                  f"{b['window']['output_throughput']}; whole-run {a['output_throughput']:.0f} "
                  f"vs {b['output_throughput']:.0f}", flush=True)
    finally:  # (also on SIGTERM: see the handler above)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)

    def count(key: str) -> dict:
        seen = [p[key] for p in pairs if p[key] is not None]
        return {"inside": sum(seen), "of": len(seen)}

    runs = [r for p in pairs for r in (p["a"], p["b"])]
    whole = np.asarray([r["output_throughput"] for r in runs])
    rel = [r["window"]["output_throughput"]["rel"] for r in runs
           if r["window"].get("output_throughput")]
    result = {
        "what": "steady-window intervals against a second run of the same configuration on "
                "`tuner sim serve` (a benchmark of the measurement, not of a GPU)",
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
                 "load_average_at_end": os.getloadavg()},
        "requests": args.requests, "concurrency": args.concurrency,
        "input_len": args.input_len, "output_len": args.output_len,
        "early_stop": args.early_stop, "time_scale": args.time_scale,
        "throughput_b_in_a": count("output_throughput_b_in_a"),
        "throughput_a_in_b": count("output_throughput_a_in_b"),
        "p99_itl_b_in_a": count("p99_itl_ms_b_in_a"),
        "p99_itl_a_in_b": count("p99_itl_ms_a_in_b"),
        # The interval reported for a repeat run (sqrt 2 wider: see tuner/loadgen/window.py).
        "throughput_b_in_a_repeat": count("output_throughput_b_in_a_repeat"),
        "throughput_a_in_b_repeat": count("output_throughput_a_in_b_repeat"),
        "p99_itl_b_in_a_repeat": count("p99_itl_ms_b_in_a_repeat"),
        "p99_itl_a_in_b_repeat": count("p99_itl_ms_a_in_b_repeat"),
        "throughput_ci_rel_median": float(np.median(rel)) if rel else None,
        "throughput_repeat_rel_median": float(np.median(
            [r["window"]["output_throughput"]["repeat_rel"] for r in runs
             if r["window"].get("output_throughput")] or [np.nan])),
        "throughput_lag1_median": float(np.median(
            [r["window"]["output_throughput"]["lag1"] for r in runs
             if r["window"].get("output_throughput")] or [np.nan])),
        "whole_run_throughput_spread_rel": float((whole.max() - whole.min()) / np.median(whole)),
        "pairs": pairs,
        "command": "python bench/bench_window.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "pairs"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: does `tuner sim serve` keep real time with 256 concurrent streams?

Starts the simulated server (H200, Llama-3-8B shape, vLLM defaults, time scale 1, with
``--sim-trace`` so it keeps each request's modelled token times), drives it in closed loop at
concurrency 256 with the load generator's own request bodies, fast HTTP client, stream
reader and clock (``tuner.loadgen``), then compares every token's arrival at the client with the time the
model says it was produced. Both sides use ``time.perf_counter`` (CLOCK_MONOTONIC, shared by
processes on Linux); the client's arrival times are the kernel's receive stamps (see
``tuner.loadgen.http1``). The server runs on the last CPU (``--sim-cpus``) and the client on
the others, so that neither waits for the other's core; ``--no-pin`` shares them. Writes
bench/results/sim.json.

    .venv/bin/python bench/bench_sim.py [--requests 768] [--concurrency 256] [--no-pin]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np

from tuner.loadgen import RequestOutput, WorkloadSpec
from tuner.loadgen.http1 import Client, send_fast
from tuner.loadgen.endpoints import build_body
from tuner.loadgen.streams import SSEParser
from tuner.loadgen.workloads import take

LLAMA3_8B = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
             "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
OUT = Path(__file__).with_name("results") / "sim.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_and_port() -> tuple[Path, int, str]:
    """A Llama-3-8B model folder (config.json only), a free port and its URL."""
    model_dir = Path(tempfile.mkdtemp()) / "llama3-8b"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(LLAMA3_8B))
    port = free_port()
    return model_dir, port, f"http://127.0.0.1:{port}"


async def wait_ready(url: str, proc: subprocess.Popen) -> None:
    async with aiohttp.ClientSession() as s:
        for _ in range(600):
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}")
            try:
                async with s.get(url + "/health") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise SystemExit("server not ready")


async def drive(url: str, model: str, n: int, concurrency: int) -> tuple[list, list, float]:
    spec = WorkloadSpec(kind="random", input_len=1024, output_len=128, vocab_size=128256, seed=7)
    reqs = take(spec, n)
    bodies = [build_body(r, "completions", model) for r in reqs]
    heads = [list(r.segments[0][1][:8]) for r in reqs]
    outs: list[RequestOutput] = []
    queue = list(range(n))[::-1]
    client = Client(url)  # the load generator's default ("fast") HTTP client
    t0 = time.perf_counter()

    async def worker() -> None:
        while queue:
            i = queue.pop()
            out = RequestOutput(index=i)
            await send_fast(client, "/v1/completions", bodies[i], SSEParser(), out,
                            time.perf_counter)
            outs.append(out)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await client.close()
    return outs, heads, time.perf_counter() - t0


def token_errors(outs: list, heads: list, trace: list) -> dict:
    due_by_head = {tuple(t["prompt_head"]): t["due"] for t in trace}
    written_by_head = {tuple(t["prompt_head"]): t["written"] for t in trace}
    server_late = np.concatenate([np.asarray(t["written"]) - np.asarray(t["due"])
                                  for t in trace]) * 1000
    server_itl_err = np.abs(np.concatenate([np.diff(t["written"]) - np.diff(t["due"])
                                            for t in trace])) * 1000
    lateness, itl_err, client_delay = [], [], []
    for o in outs:
        due = due_by_head.get(tuple(heads[o.index]))
        if not o.success or due is None:
            continue
        arrivals = o.start_time + o.ttft + np.concatenate([[0.0], np.cumsum(o.itl)])
        k = min(len(arrivals), len(due))
        d = np.asarray(due[:k])
        lateness.extend((arrivals[:k] - d) * 1000)
        itl_err.extend((np.diff(arrivals[:k]) - np.diff(d)) * 1000)
        client_delay.extend((arrivals[:k] - np.asarray(written_by_head[tuple(heads[o.index])][:k]))
                            * 1000)
    late, ie = np.asarray(lateness), np.abs(np.asarray(itl_err))

    def q(a):
        return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
                "max": float(a.max()), "tokens": int(a.size)}
    return {"arrival_minus_modelled_ms": q(late), "abs_itl_error_ms": q(ie),
            "server_write_minus_modelled_ms": q(server_late),
            # the two halves of the error: the server's write times against the model, and
            # the client's arrival times against the server's writes
            "server_abs_itl_error_ms": q(server_itl_err),
            "arrival_minus_written_ms": q(np.asarray(client_delay))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=768)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-pin", action="store_true",
                    help="let server and client share every CPU (the kernel places them)")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    pin = not args.no_pin and len(cpus) >= 2
    server_cpus = ["--sim-cpus", str(cpus[-1])] if pin else []
    if pin:
        os.sched_setaffinity(0, cpus[:-1])
    model_dir, port, url = model_and_port()
    prof = ["-m", "cProfile", "-o", os.environ["BENCH_SIM_PROFILE"]] if os.environ.get("BENCH_SIM_PROFILE") else []
    proc = subprocess.Popen([sys.executable, *prof, "-m", "tuner.sim", "serve", "--model",
                             str(model_dir), "--port", str(port), "--gpu", "h200",
                             "--sim-trace", *server_cpus], stdout=subprocess.DEVNULL)
    try:
        asyncio.run(wait_ready(url, proc))
        outs, heads, wall = asyncio.run(drive(url, str(model_dir), args.requests, args.concurrency))

        async def fetch(path):
            async with aiohttp.ClientSession() as s, s.get(url + path) as r:
                return await r.text()
        traced = json.loads(asyncio.run(fetch("/sim/trace")))
        trace, steps_log = traced["requests"], traced["steps"]
        metrics = asyncio.run(fetch("/metrics"))
        ticks = os.sysconf("SC_CLK_TCK")
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        server_cpu_s = (int(fields[11]) + int(fields[12])) / ticks
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    errors = token_errors(outs, heads, trace)
    # Per decode step (<= concurrency tokens): how long the server took to write its tokens.
    writes = np.asarray([w for _, _, n, w, _ in steps_log if n <= args.concurrency]) * 1000
    sims = np.asarray([s for _, _, n, _, s in steps_log if n <= args.concurrency]) * 1000
    ok = [o for o in outs if o.success]
    late_steps = [ln for ln in metrics.splitlines() if ln.startswith("tuner_sim:late_steps_total")]
    steps = [ln for ln in metrics.splitlines() if ln.startswith("tuner_sim:steps_total")]
    result = {
        "what": "token timing of `tuner sim serve` under 256 concurrent streams, measured by "
                "the load generator's stream reader (a benchmark of the simulator, not of a GPU)",
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
                 "load_average_at_end": os.getloadavg()},
        "requests": args.requests, "concurrency": args.concurrency, "succeeded": len(ok),
        "cpus": {"server": cpus[-1:] if pin else cpus, "client": cpus[:-1] if pin else cpus},
        "wall_s": wall, "server_cpu_s": server_cpu_s, "client_cpu_s": time.process_time(),
        "output_tokens_per_s_wall": sum(o.output_tokens for o in ok) / wall,
        "server_steps": float(steps[0].split()[-1]) if steps else None,
        "server_late_steps": float(late_steps[0].split()[-1]) if late_steps else None,
        **errors,
        "decode_step_write_ms": {"p50": float(np.percentile(writes, 50)),
                                 "p99": float(np.percentile(writes, 99))} if writes.size else None,
        "decode_step_modelled_ms": {"p50": float(np.percentile(sims, 50))} if sims.size else None,
        "command": "python bench/bench_sim.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

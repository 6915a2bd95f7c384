"""Plain against pre-imported starts of one compiled configuration, on the GPU machine
(issue 45, part 2): how long each takes to a healthy /health, and whether the servers they
start measure the same.

    PYTHONPATH=REPO:/tmp/site python3 scripts/gpu/start_paths.py MODEL_DIR OUT_DIR \
        [--starts N] [--first I] [--cache DIR] [--python PY] [--env NAME=VALUE ...] \
        [-- FLAG ...]

Needs only the engine's Python (the kit's, ``source scripts/gpu/env.sh``) and this repo on
PYTHONPATH: it uses ``tuner.engine.forkclient`` (standard library only) and starts the
supervisor ``tuner/engine/forkserver.py`` exactly as a worker does. On one compile cache
(a fresh folder, warmed by one plain start that is not counted), it alternates N plain and
N pre-imported starts (plain, preimported, plain, ...: drift hits both alike). Both paths
get ``VLLM_WORKER_MULTIPROC_METHOD=fork`` unless ``--env`` sets it, so that the comparison
is of the pre-import alone; ``--plain-spawn`` leaves the plain path on vLLM's default.
Each healthy server runs the same seeded ``vllm bench serve`` (random prompts, fixed
concurrency) and is stopped. Writes ``OUT_DIR/start-paths.json`` (every start: path,
healthy seconds, exit code, request and output throughput, p99 ITL/TTFT) with per-path
medians and ranges (rewritten after every start, so a call cut short keeps what it
measured), and each server's log as ``OUT_DIR/<path>-<i>.log``. ``--cache DIR`` keeps the
compile cache in DIR: a later call on the same warm machine with ``--first I`` numbers its
starts from I and skips the warm-up start when DIR already holds a compiled artefact.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tuner.engine import proctree
from start_profile import healthy  # this folder, first on sys.path when run as a file
from tuner.engine.forkclient import ForkedProcess, ForkServer
from tuner.engine.ports import free_port

SERVER = "vllm.entrypoints.openai.api_server"
BENCH = ["--dataset-name", "random", "--random-input-len", "1024", "--random-output-len",
         "128", "--num-prompts", "400", "--max-concurrency", "64", "--ignore-eos",
         "--seed", "0", "--num-warmups", "16", "--percentile-metrics", "ttft,tpot,itl,e2el",
         "--metric-percentiles", "50,99", "--disable-tqdm"]
KEPT = ("request_throughput", "output_throughput", "p99_itl_ms", "median_itl_ms",
        "p99_ttft_ms", "median_tpot_ms")


def stop(proc) -> None:
    """SIGTERM to the group, SIGKILL after 30 s, until nothing of the group is left."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and (proc.poll() is None or
                                                proctree.in_group(proc.pid)):
            time.sleep(0.1)
        if proc.poll() is not None and not proctree.in_group(proc.pid):
            return


def bench(py: str, model: str, port: int, out: Path) -> dict:
    cmd = [py, "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "vllm",
           "--base-url", f"http://127.0.0.1:{port}", "--model", model, *BENCH,
           "--save-result", "--result-dir", str(out.parent), "--result-filename", out.name]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if res.returncode != 0 or not out.exists():
        return {"bench_error": res.stderr[-2000:]}
    data = json.loads(out.read_text())
    return {k: data.get(k) for k in KEPT}


def one_start(path: str, i: int, args, env: dict, flags: list[str],
              forkserver: ForkServer | None) -> dict:
    port = free_port()
    argv = [args.python, "-m", SERVER, "--model", args.model, "--port", str(port),
            "--load-format", "dummy", *flags]
    log = args.out / f"{path}-{i}.log"
    log.write_text("$ " + " ".join(argv) + "\n")
    t0 = time.monotonic()
    if forkserver is None:
        with open(log, "ab") as f:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    preexec_fn=proctree.terminate_with_parent)
    else:
        reply = forkserver.request({"op": "start", "argv": argv, "env": env,
                                    "log": str(log.resolve()), "cwd": os.getcwd()})
        proc = ForkedProcess(reply["pid"], forkserver)
    row: dict = {"path": path, "i": i, "healthy_s": None}
    while proc.poll() is None and time.monotonic() - t0 < args.timeout:
        if healthy(port):
            row["healthy_s"] = round(time.monotonic() - t0, 2)
            break
        time.sleep(0.25)
    if row["healthy_s"] is not None:
        row.update(bench(args.python, args.model, port, args.out / f"bench-{path}-{i}.json"))
    stop(proc)
    row["rc"] = proc.poll()
    print(json.dumps(row), flush=True)
    return row


def summary(rows: list[dict]) -> dict:
    out = {}
    for key in ("healthy_s", *KEPT):
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            out[key] = {"median": statistics.median(values), "min": min(values),
                        "max": max(values), "n": len(values)}
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("out", type=Path)
    p.add_argument("--starts", type=int, default=3)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--cache", type=Path)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--plain-spawn", action="store_true")
    p.add_argument("--timeout", type=float, default=900)
    # the server's flags follow "--": argparse cannot take "--max-num-seqs" as a
    # positional value, so they are what it does not know
    args, rest = p.parse_known_args()
    if rest[:1] == ["--"]:
        rest = rest[1:]
    if any(not f.startswith("--") for f in rest[:1]):
        p.error(f"unrecognised arguments before the server's flags: {rest}")
    args.out.mkdir(parents=True, exist_ok=True)
    flags = rest or ["--max-num-batched-tokens", "2048", "--max-num-seqs", "256"]
    cache = args.cache or Path(tempfile.mkdtemp(prefix="start-paths-cache-"))
    warm = not any((cache / "vllm").glob("torch_compile_cache/*"))
    base = {**os.environ, "VLLM_CACHE_ROOT": str(cache / "vllm"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "TRITON_CACHE_DIR": str(cache / "triton"), "CUDA_VISIBLE_DEVICES": "0"}
    base.update(dict(e.split("=", 1) for e in args.env))
    forked = {"VLLM_WORKER_MULTIPROC_METHOD": "fork", **base}
    plain_env = base if args.plain_spawn else forked
    t0 = time.monotonic()
    forkserver = ForkServer(args.python, SERVER, forked, args.out / "forkserver.log")
    ready = {**forkserver.ready, "wall_s": round(time.monotonic() - t0, 2)}
    rows = []

    def write() -> dict:
        result = {"flags": flags, "starts": args.starts, "first": args.first,
                  "supervisor": ready, "plain_env_fork": not args.plain_spawn, "rows": rows,
                  "summary": {path: summary([r for r in rows if r["path"] == path])
                              for path in ("plain", "preimported")}}
        (args.out / "start-paths.json").write_text(json.dumps(result, indent=1))
        return result

    if warm:
        rows.append(dict(one_start("warm", 0, args, plain_env, flags, None), counted=False))
    for i in range(args.first, args.first + args.starts):
        rows.append(one_start("plain", i, args, plain_env, flags, None))
        write()
        rows.append(one_start("preimported", i, args, forked, flags, forkserver))
        write()
    forkserver.close()
    print(json.dumps(write()["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

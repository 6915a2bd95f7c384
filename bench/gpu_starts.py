"""Start times of vLLM on the GPU machine, phase by phase, with and without a compile-cache
hit (docs/starts.md). Not part of `make bench` (it needs a GPU and vLLM).

    python bench/gpu_starts.py studies/llama3-8b-h200.toml --cache-root /root/tuner-home/cache \
        --starts 'budget=2048' 'budget=2048' 'budget=2896' 'budget=2896,O=0' 'budget=2048' \
        --out bench/results/gpu-starts.json

Each start is the worker's: the study's command line with its fixed flags and the given ones (budget: the token
budget; O: -O level; eager: 1), the compile caches under --cache-root (engine.cache_env), the
server started, waited for and stopped by the same Server class. It prints one line per start
(measured start, compile-cache hit or miss, compile, warm-up) and the median start of the
starts after the first, and writes every start's phases as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.engine import command as engine, startlog  # noqa: E402
from tuner.engine.ports import free_port  # noqa: E402
from tuner.engine.supervisor import Server  # noqa: E402
from tuner.space import build_space  # noqa: E402
from tuner.storage import load_study_file  # noqa: E402

KEYS = {"budget": ("max_num_batched_tokens", int), "O": ("optimization_level", int),
        "eager": ("enforce_eager", lambda v: v == "1"), "seqs": ("max_num_seqs", int)}


def flags_of(text: str) -> dict:
    out = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        name, conv = KEYS[key.strip()]
        out[name] = conv(value.strip())
    return out


def du_mib(path: Path) -> float:
    done = subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True)
    return float(done.stdout.split()[0]) if done.returncode == 0 and done.stdout else 0.0


def one_start(spec, flags: dict, cache_root: Path, logs: Path, n: int) -> dict:
    port = free_port()
    launch = engine.launch(spec, flags, port, spec.hardware.gpus, cache_root=cache_root,
                           inherited=os.environ)
    server = Server(launch, port, logs / f"start-{n:02d}.log")
    t0 = time.monotonic()
    server.start()
    try:
        start_s = server.wait_healthy(spec.engine.start_timeout_s)
    finally:
        server.stop(spec.engine.stop_grace_s)
    phases = startlog.with_process_start(startlog.start_phases(server.log()), start_s)
    return {"flags": flags, "start_s": round(start_s, 2), "wall_s": round(time.monotonic() - t0, 2),
            "phases": phases, "cache_mib": du_mib(cache_root)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study")
    p.add_argument("--starts", nargs="+", required=True, metavar="K=V,...")
    p.add_argument("--cache-root", type=Path, required=True)
    p.add_argument("--logs", type=Path, default=Path("/tmp/gpu-starts"))
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    spec = load_study_file(args.study)
    args.logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for n, text in enumerate(args.starts):
        flags = {**build_space(spec).fixed, **flags_of(text)}  # the study's fixed flags too
        row = one_start(spec, flags, args.cache_root, args.logs, n)
        ph = row["phases"]
        print(f"start {n} {text:<24} {row['start_s']:6.1f} s  compile "
              f"{ph.get('compile', '-')} ({ph.get('compile_cache', '-')})  warmup "
              f"{ph.get('warmup', '-')}  api_start {ph.get('api_start', '-')}  "
              f"process_start {ph.get('process_start', '-')}  cache {row['cache_mib']:.0f} MiB",
              flush=True)
        rows.append(row)
    later = [r["start_s"] for r in rows[1:]]
    summary = {"median_start_after_first_s": statistics.median(later) if later else None,
               "spread_s": [min(later), max(later)] if later else None}
    print(f"median start after the first: {summary['median_start_after_first_s']} s "
          f"(range {summary['spread_s']})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"study": args.study, "starts": rows, **summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a vLLM start's time goes, measured on the GPU machine (issue 45, part 1).

    python3 scripts/gpu/start_profile.py MODEL_DIR OUT_DIR [--starts N] [-- FLAG ...]

Run with the kit's environment (``source scripts/gpu/env.sh``) and the machine's Python.
It writes into OUT_DIR:

* ``importtime.txt``: ``python -X importtime`` of the API server module, run twice (the
  second with a warm page cache), with the 30 imports that take longest, cumulative.
* ``start-N.log``: every line the server printed, each prefixed with the seconds since the
  spawn as this script read it (sub-second, unlike vLLM's own stamps).
* ``starts.json``: per start, the seconds from the spawn to each landmark line, how the
  engine core process was started (its command line: ``spawn_main`` for spawn, the API
  server's own for fork), and the time to a healthy ``/health``.

The same flags are started ``--starts`` times in a row on one compile cache (a fresh folder):
the first start compiles, the later ones may load from the cache.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

SERVER = "vllm.entrypoints.openai.api_server"
# Landmark lines, in the order vLLM 0.24 prints them.
LANDMARKS = {
    "first_line": "",
    "banner": "vLLM API server version",
    "args_resolved": "non-default args",
    "engine_first": "(EngineCore",
    "engine_init": "Initializing a V1 LLM engine",
    "dist_init": "world_size=",
    "weights_start": "Starting to load model",
    "weights_done": "Model loading took",
    "compile_done": "torch.compile took",
    "kv_size": "KV cache size:",
    "graphs_done": "Graph capturing finished",
    "init_engine_done": "init engine (profile, create kv cache",
    "api_routes": "Starting vLLM API server",
    "ready": "Application startup complete",
}


def import_profile(py: str, out: Path) -> dict:
    """Two ``-X importtime`` runs of the server module: wall seconds and the top imports."""
    runs = []
    for i in range(2):
        t0 = time.monotonic()
        res = subprocess.run([py, "-X", "importtime", "-c", f"import {SERVER}"],
                             capture_output=True, text=True, timeout=300)
        runs.append({"wall_s": round(time.monotonic() - t0, 2), "rc": res.returncode,
                     "stderr": res.stderr})
    rows = []
    for line in runs[1]["stderr"].splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            rows.append((int(m.group(2)), int(m.group(1)), len(m.group(3)) // 2, m.group(4)))
    top = sorted(rows, reverse=True)[:30]
    with open(out / "importtime.txt", "w") as f:
        f.write(f"wall seconds: first {runs[0]['wall_s']}, second {runs[1]['wall_s']}\n")
        f.write("cumulative_s  self_s  depth  module   (second run)\n")
        for cum, own, depth, mod in top:
            f.write(f"{cum / 1e6:12.2f} {own / 1e6:7.2f} {depth:6d}  {mod}\n")
        f.write("\n--- raw, second run ---\n" + runs[1]["stderr"])
    return {"wall_s": [r["wall_s"] for r in runs], "rc": [r["rc"] for r in runs],
            "top": [{"module": m, "cumulative_s": c / 1e6, "self_s": s / 1e6}
                    for c, s, _, m in top[:15]]}


def children(pid: int) -> list[tuple[int, str]]:
    """Every descendant of ``pid`` with its command line."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True)
    kids: dict[int, list[tuple[int, str]]] = {}
    for line in out.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2:
            kids.setdefault(int(parts[1]), []).append((int(parts[0]), (parts[2:] or [""])[0]))
    found, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def one_start(py: str, model: str, flags: list[str], env: dict, log: Path, port: int) -> dict:
    """Start the server, stamp its lines, return the landmarks; stop it."""
    argv = [py, "-m", SERVER, "--model", model, "--port", str(port), "--load-format", "dummy",
            *flags]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    marks: dict[str, float] = {}
    lines: list[str] = []
    # with PYTHONPROFILEIMPORTTIME=1: when each process finished importing torch and vllm
    # (twice means the engine core imported them again: it was spawned, not forked)
    top_imports: list[tuple[float, str]] = []

    def read() -> None:
        for line in proc.stdout:
            t = time.monotonic() - t0
            lines.append(f"{t:8.2f} {line}")
            m = re.search(r"\|\s(torch|vllm|transformers)$", line.rstrip())
            if m and line.startswith("import time:"):
                top_imports.append((round(t, 2), m.group(1)))
            for name, text in LANDMARKS.items():
                if name not in marks and text in line:
                    marks[name] = round(t, 2)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    engine_cmd, ready = None, None
    while proc.poll() is None and time.monotonic() - t0 < 600:
        if engine_cmd is None and "engine_first" in marks:
            kids = [a for _, a in children(proc.pid) if "python" in a or "VLLM" in a]
            engine_cmd = kids
        if healthy(port):
            ready = round(time.monotonic() - t0, 2)
            break
        time.sleep(0.25)
    tree = children(proc.pid)
    os.killpg(proc.pid, 15)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    reader.join(5)
    log.write_text("".join(lines))
    return {"healthy_s": ready, "rc": proc.returncode, "marks": marks,
            "engine_core_cmdline": engine_cmd, "process_tree": [a for _, a in tree],
            "top_imports_at": top_imports}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("out", type=Path)
    p.add_argument("--starts", type=int, default=3)
    p.add_argument("--port", type=int, default=8123)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--skip-imports", action="store_true")
    p.add_argument("--label", default="default")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="set for the server (repeat), e.g. PYTHONPROFILEIMPORTTIME=1")
    p.add_argument("flags", nargs="*")
    a, rest = p.parse_known_args()  # the server's flags, after '--'
    a.flags = [f for f in a.flags + rest if f != "--"]
    a.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"argv_flags": a.flags, "label": a.label}
    if not a.skip_imports:
        result["imports"] = import_profile(a.python, a.out)
        print("imports:", result["imports"]["wall_s"], flush=True)
    cache = tempfile.mkdtemp(prefix="vllm-cache-")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "VLLM_CACHE_ROOT": f"{cache}/vllm",
           "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor", "TRITON_CACHE_DIR": f"{cache}/triton",
           **dict(e.split("=", 1) for e in a.env)}
    result["env"] = a.env
    result["starts"] = []
    for i in range(a.starts):
        r = one_start(a.python, a.model, a.flags, env, a.out / f"{a.label}-start-{i}.log",
                      a.port)
        result["starts"].append(r)
        print(f"start {i}: healthy {r['healthy_s']} s; marks {r['marks']}", flush=True)
        time.sleep(3)  # the GPU's memory released before the next start
    (a.out / f"{a.label}-starts.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

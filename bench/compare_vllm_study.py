"""Our client beside `vllm bench serve`, in turn, on one server of a study's engine.

`bench/compare_vllm.py` does this on the vLLM CPU build; this one starts the server a study
file describes (its engine, model, extra args and environment, one configuration of flags,
on GPU 0) and measures it as a worker does: our run is the study's workload and
measurement (`tuner.runner.plans.workload_of` / `load_of`: warm-up, early stop, cap),
vLLM's is the worker's cross-check command (`tuner.runner.crosscheck.command`: the same
lengths, concurrency and warm-ups, as many requests as our run right before it completed).
The two alternate ``--repeats`` times on the same server, each pair with seed + i, after an
optional priming run of ours (``--prime N`` requests, not counted: the first run on a fresh
server reads apart, docs/loadgen.md). Per metric it reports each client's spread over its
own runs beside the difference between the clients' medians: a difference inside a
client's own spread is no bias of the client.

    python bench/compare_vllm_study.py studies/llama3-8b-h200.toml --repeats 3 --out r.json
    ... --flags '{"max_num_batched_tokens": 1222}' --concurrency 16 --num-requests 600

``--concurrency`` and ``--num-requests`` (a fixed count: the early stop off) change the
study's workload for this comparison. The JSON is rewritten after every run, so a run cut
short still leaves what it measured. A benchmark, not a test: it needs the study's engine
(the H200 kit: scripts/gpu/install.sh, then `source scripts/gpu/env.sh`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compare_vllm import print_table, summarize  # noqa: E402
from tuner.loadgen import run_benchmark  # noqa: E402
from tuner.runner import crosscheck  # noqa: E402
from tuner.engine import command as engine
from tuner.runner.plans import load_of, slo_of, workload_of  # noqa: E402
from tuner.engine.ports import free_port  # noqa: E402
from tuner.engine.supervisor import Server  # noqa: E402
from tuner.storage.load import load_study_file  # noqa: E402
from tuner.spec.study import StudySpec  # noqa: E402

KEYS = ("output_throughput", "median_ttft_ms", "mean_ttft_ms", "p99_ttft_ms",
        "median_itl_ms", "p99_itl_ms", "median_tpot_ms", "median_e2el_ms", "completed")


def adjusted(spec: StudySpec, concurrency: int | None, num_requests: int | None) -> StudySpec:
    """The study with this comparison's workload: another concurrency (warm-ups capped at
    it) and/or a fixed request count (no early stop)."""
    workload, measurement = spec.workload, spec.measurement
    if concurrency:
        workload = workload.model_copy(update={
            "max_concurrency": concurrency,
            "warmup_requests": min(workload.warmup_requests, concurrency)})
    if num_requests:
        workload = workload.model_copy(update={"num_requests": num_requests})
        measurement = measurement.model_copy(update={"early_stop": False})
    return spec.model_copy(update={"workload": workload, "measurement": measurement})


def ours(spec: StudySpec, url: str, seed: int, num_requests: int | None = None) -> dict:
    workload = workload_of(spec).model_copy(update={"seed": seed})
    load = load_of(spec)
    if num_requests:
        load = load.model_copy(update={"num_requests": num_requests, "early_stop": False})
    r = asyncio.run(run_benchmark(url, engine.served_name(spec), workload, load,
                                  slo=slo_of(spec)))
    out = {k: v for k, v in r.metrics.items() if isinstance(v, (int, float))}
    return dict(out, valid=r.valid, invalid_reason=r.invalid_reason,
                stop_reason=r.stop_reason)


def theirs(spec: StudySpec, url: str, env: dict[str, str], seed: int, prompts: int) -> dict:
    seeded = spec.model_copy(update={"workload": spec.workload.model_copy(update={"seed": seed})})
    return crosscheck.run(seeded, url, engine.served_name(spec), env, prompts)


def _line(name: str, i: int, n: int, r: dict) -> str:
    if "error" in r:
        return f"[{i + 1}/{n}] {name}: {r['error'][:300]}"
    return (f"[{i + 1}/{n}] {name:5s} requests={r.get('completed', 0):5.0f} "
            f"out tok/s={r['output_throughput']:8.1f}  median TTFT={r['median_ttft_ms']:8.1f} ms"
            f"  median ITL={r['median_itl_ms']:6.2f} ms  p99 ITL={r['p99_itl_ms']:6.1f} ms"
            f"  median TPOT={r.get('median_tpot_ms', float('nan')):6.2f} ms")


def compare(spec: StudySpec, flags: dict, a: argparse.Namespace, out: Path) -> dict:
    port = free_port()
    launch = engine.launch(spec, flags, port, [0])
    logs = out.with_suffix(".server.log")
    result = {"study": spec.name, "flags": flags, "argv": list(launch.argv),
              "settings": {k: v for k, v in vars(a).items() if k != "study"},
              "workload": spec.workload.model_dump(), "runs": {"ours": [], "vllm": []}}
    with Server(launch, port, logs) as server:
        t0 = time.monotonic()
        result["start_s"] = server.wait_healthy(spec.engine.start_timeout_s)
        print(f"server healthy in {time.monotonic() - t0:.0f} s: {' '.join(launch.argv)}",
              file=sys.stderr, flush=True)
        env = engine.engine_environment(os.environ, launch)
        if a.prime:
            r = ours(spec, server.url, spec.workload.seed + 999, a.prime)
            result["prime"] = r
            print(_line("prime", 0, 1, r), file=sys.stderr, flush=True)
        for i in range(a.repeats):
            seed = spec.workload.seed + i
            mine = ours(spec, server.url, seed)
            result["runs"]["ours"].append(mine)
            print(_line("ours", i, a.repeats, mine), file=sys.stderr, flush=True)
            vllm = theirs(spec, server.url, env, seed, int(mine.get("completed") or 0) or None)
            result["runs"]["vllm"].append(vllm)
            print(_line("vllm", i, a.repeats, vllm), file=sys.stderr, flush=True)
            result["table"] = summarize(result["runs"], KEYS, "median")
            out.write_text(json.dumps(result, indent=1, default=str))
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", help="the study file (its engine, model and workload)")
    p.add_argument("--flags", default="{}", help="the configuration, as JSON (default: vLLM's defaults)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--prime", type=int, default=0, help="requests of ours first, not counted")
    p.add_argument("--concurrency", type=int, help="instead of the study's max_concurrency")
    p.add_argument("--num-requests", type=int, help="a fixed count instead of the study's (no early stop)")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    spec = adjusted(load_study_file(a.study), a.concurrency, a.num_requests)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = compare(spec, json.loads(a.flags), a, out)
    print_table(result.get("table", {}), "median")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Our load generator beside `vllm bench serve`, on the same running server, for several
configurations: for the GPU run (issue 10), and locally with the CPU build to rehearse it.

    python scripts/gpu/compare.py --python PY --model DIR --vocab N \
        --config '{"max_model_len": 2048}' --config '{...}' [--repeats 2] --out FILE

Each configuration's server is started once (supervised like a trial's), then the two
clients run in turn, ``--repeats`` times each, on the same workload (random prompts,
exact lengths, ignore_eos, same concurrency and request count). Writes JSON with the
per-run figures and, per metric, the spread between repeats beside the difference between
clients (the same table as bench/compare_vllm.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compare_vllm import summarize  # noqa: E402

from tuner.loadgen import LoadSpec, WorkloadSpec, run_benchmark  # noqa: E402
from tuner.engine.command import Launch  # noqa: E402
from tuner.engine.ports import free_port  # noqa: E402
from tuner.engine.supervisor import Server  # noqa: E402
from tuner.space.argv import flags_argv  # noqa: E402


def ours(url: str, name: str, a) -> dict:
    workload = WorkloadSpec(kind="random", input_len=a.input_len, output_len=a.output_len,
                            vocab_size=a.vocab, seed=a.seed)
    load = LoadSpec(max_concurrency=a.concurrency, num_requests=a.num_requests,
                    warmup_requests=a.warmups, endpoint="completions")
    r = asyncio.run(run_benchmark(url, name, workload, load))
    return dict(r.metrics, valid=r.valid, invalid_reason=r.invalid_reason, client=r.client,
                server=r.server)


def theirs(url: str, name: str, a, work: Path, tag: str) -> dict:
    out = f"vllm-{tag}.json"
    cmd = [a.python, "-m", "vllm.entrypoints.cli.main", "bench", "serve",
           "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
           "--model", name, "--tokenizer", a.model, "--dataset-name", "random",
           "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len),
           "--num-prompts", str(a.num_requests), "--max-concurrency", str(a.concurrency),
           "--ignore-eos", "--num-warmups", str(a.warmups), "--seed", str(a.seed),
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
           "--save-result", "--result-dir", str(work), "--result-filename", out,
           "--disable-tqdm"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        return {"error": f"vllm bench serve exited {p.returncode}: {p.stderr[-2000:]}"}
    data = json.loads((work / out).read_text())
    return {k: v for k, v in data.items() if not isinstance(v, list)}


def run_config(flags: dict, a, work: Path, log_dir: Path, index: int) -> dict:
    port = free_port()
    argv = (a.python, "-m", "vllm.entrypoints.openai.api_server", "--model", a.model,
            "--served-model-name", "model", "--host", "127.0.0.1", "--port", str(port),
            "--load-format", "dummy", *a.server_args, *flags_argv(flags))
    server = Server(Launch(argv, {}), port, log_dir / f"compare-{index}.log")
    runs: dict[str, list[dict]] = {"ours": [], "vllm": []}
    with server:
        started = server.wait_healthy(a.start_timeout)
        print(f"config {index} {flags}: ready in {started:.0f} s", file=sys.stderr, flush=True)
        for i in range(a.repeats):
            for who in ("ours", "vllm"):
                t0 = time.monotonic()
                r = (ours(server.url, "model", a) if who == "ours"
                     else theirs(server.url, "model", a, work, f"{index}-{i}"))
                r["wall_s"] = time.monotonic() - t0
                runs[who].append(r)
                print(f"  [{i + 1}/{a.repeats}] {who:5s} out tok/s="
                      f"{r.get('output_throughput', float('nan')):9.1f} median TTFT="
                      f"{r.get('median_ttft_ms', float('nan')):8.1f} ms median ITL="
                      f"{r.get('median_itl_ms', float('nan')):7.2f} ms p99 ITL="
                      f"{r.get('p99_itl_ms', float('nan')):7.1f} ms ({r['wall_s']:.0f} s)",
                      file=sys.stderr, flush=True)
    ok = {k: [r for r in v if "error" not in r] for k, v in runs.items()}
    return {"flags": flags, "start_s": started, "runs": runs,
            "table": summarize(ok) if ok["ours"] and ok["vllm"] else {}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--model", required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--config", action="append", default=[], help="JSON flags of a config")
    p.add_argument("--server-arg", dest="server_args", action="append", default=[])
    p.add_argument("--num-requests", type=int, default=1000)
    p.add_argument("--input-len", type=int, default=1024)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--warmups", type=int, default=32)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start-timeout", type=float, default=600)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    configs = [json.loads(c) for c in a.config] or [{}]
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="compare-") as tmp:
        for i, flags in enumerate(configs):
            results.append(run_config(flags, a, Path(tmp), out.parent, i))
            out.write_text(json.dumps({"settings": vars(a), "configs": results}, indent=2,
                                      default=str))
    for r in results:
        print(f"\nconfig {r['flags']}")
        for key, row in r["table"].items():
            print(f"  {key:<20} ours {row['ours_mean']:10.2f}  vllm {row['vllm_mean']:10.2f}  "
                  f"spread {row['ours_spread']:6.1%} / {row['vllm_spread']:6.1%}  "
                  f"difference {row['difference']:+6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

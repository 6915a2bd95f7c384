"""`tuner bench`: benchmark any OpenAI-compatible (or vLLM api_server) endpoint.

OPENAI_API_KEY, when set, is sent as a bearer token (as vLLM's benchmark does)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
import time
from pathlib import Path

from tuner.spec.durations import duration_s
from tuner.errors import BenchmarkError, UsageError
from tuner.limits import MAX_TIME_SCALE
from tuner.loadgen import SLO, LoadSpec, WorkloadSpec, fetch_model, run_benchmark
from tuner.loadgen.priority import NORMAL, PRIORITIES
from tuner.loadgen.report import format_summary
from tuner.loadgen.spec import ENDPOINTS, WORKLOAD_KINDS
from tuner.loadgen.trace import load_trace

log = logging.getLogger(__name__)
MODEL_TIMEOUT_S = 30.0  # the model lookup's own limit (a shorter --request-timeout wins)


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="benchmark a serving endpoint (vLLM's metrics)",
                              description=__doc__)
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", help="model name (default: the first of /v1/models)")
    p.add_argument("--endpoint", choices=ENDPOINTS, default="completions",
                   help="completions (token-id prompts, exact lengths), chat, or generate "
                        "(vLLM api_server) [completions]")
    w = p.add_argument_group("workload")
    w.add_argument("--workload", choices=WORKLOAD_KINDS, default="random")
    w.add_argument("--input-len", type=int, default=1024)
    w.add_argument("--output-len", type=int, default=128,
                   help="tokens to generate (ignore_eos); 0 with sharegpt: the reply's length")
    w.add_argument("--range-ratio", type=float, default=0.0)
    w.add_argument("--num-prefixes", type=int, default=8, help="shared-prefix: prefixes [8]")
    w.add_argument("--prefix-len", type=int, default=512, help="shared-prefix: tokens [512]")
    w.add_argument("--turns", type=int, default=4, help="multi-turn: turns [4]")
    w.add_argument("--conversations", type=int, default=32, help="multi-turn: batch size [32]")
    w.add_argument("--dataset", help="sharegpt: path to a ShareGPT-format JSON file")
    w.add_argument("--trace", metavar="FILE",
                   help="trace: a Mooncake JSONL or Azure CSV file, replayed in its order, "
                        "lengths and times (read and checked before a request is sent)")
    w.add_argument("--vocab-size", type=int, default=32000,
                   help="token ids are drawn below this: the model's vocabulary size [32000]")
    w.add_argument("--seed", type=int, default=0)
    lo = p.add_argument_group("load")
    lo.add_argument("--max-concurrency", type=int, default=256)
    lo.add_argument("--request-rate", type=float, default=math.inf, help="req/s [inf]")
    lo.add_argument("--burstiness", type=float, default=1.0, help="gamma shape; 1 = Poisson")
    lo.add_argument("--speedup", type=float,
                    help="trace: replay its arrival times this many times faster [1]")
    lo.add_argument("--num-requests", type=int, default=1000)
    lo.add_argument("--duration", type=float, help="seconds; replaces --num-requests")
    lo.add_argument("--warmup", type=int, default=16, help="uncounted warm-up requests [16]")
    lo.add_argument("--client-processes", type=int, default=1)
    lo.add_argument("--http-client", choices=("fast", "aiohttp"), default="fast")
    lo.add_argument("--request-timeout", default="6h", metavar="DURATION",
                    help="the longest one request may take, its whole reply included: past "
                         "it the request fails (reason TimeoutError); also bounds the model "
                         "lookup and /metrics reads, e.g. 90s, 10m [6h, as vLLM's client]")
    lo.add_argument("--max-client-lag-ms", type=float, default=5.0)
    lo.add_argument("--text-prompts", action="store_true",
                    help="completions prompts as words, not token ids (servers without ids)")
    lo.add_argument("--no-ignore-eos", action="store_true",
                    help="let the model stop early (servers that reject ignore_eos)")
    lo.add_argument("--think-time-ms", type=float, default=0.0,
                    help="closed loop: each client's pause between a response and its next "
                         "request [0]")
    lo.add_argument("--client-priority", choices=PRIORITIES, default=NORMAL,
                    help="realtime: the client thread on real-time scheduling where the OS "
                         "allows it (root or CAP_SYS_NICE), on a machine whose cores the "
                         "server saturates [normal]")
    lo.add_argument("--min-gap-share", type=float, default=0.9,
                    help="share of inter-token gaps that must be seen to tell an ITL [0.9]")
    st = p.add_argument_group("steady window (closed loop)")
    st.add_argument("--early-stop", action="store_true",
                    help="stop once the window's intervals are within the targets below")
    st.add_argument("--throughput-ci", type=float, default=0.02,
                    help="relative half-width target for output throughput [0.02]")
    st.add_argument("--itl-ci", type=float, default=0.10,
                    help="relative half-width target for p99 ITL [0.10]")
    st.add_argument("--max-requests", type=int, help="the early stop's cap [4 x num-requests]")
    st.add_argument("--itl-per-token", action="store_true",
                    help="the window's ITL is the per-token one (servers batching tokens)")
    s = p.add_argument_group("SLOs (goodput)")
    for name in ("ttft", "itl", "tpot", "e2el"):
        s.add_argument(f"--slo-{name}-ms", type=float)
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="the server runs this many times faster than real time [1]")
    p.add_argument("--json", type=Path, help="write the full result as JSON here")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def specs(args: argparse.Namespace) -> tuple[WorkloadSpec, LoadSpec, SLO]:
    """The validated specs of the command line (UsageError names the bad option)."""
    if not args.url.startswith(("http://", "https://")):
        raise UsageError(f"--url {args.url!r} must start with http:// or https://")
    if not 0 < args.time_scale <= MAX_TIME_SCALE:
        raise UsageError(f"--time-scale must be > 0 and at most {MAX_TIME_SCALE:g}")
    trace, digest, speedup = _trace(args)
    workload = WorkloadSpec(
        kind=args.workload, input_len=args.input_len, output_len=args.output_len,
        range_ratio=args.range_ratio, num_prefixes=args.num_prefixes,
        prefix_len=args.prefix_len, turns=args.turns, dataset=args.dataset,
        vocab_size=args.vocab_size, seed=args.seed, conversations=args.conversations,
        trace=trace, trace_sha256=digest)
    load = LoadSpec(
        max_concurrency=args.max_concurrency, request_rate=args.request_rate,
        burstiness=args.burstiness, speedup=speedup, num_requests=args.num_requests,
        duration_s=args.duration,
        warmup_requests=args.warmup, endpoint=args.endpoint,
        client_processes=args.client_processes, http_client=args.http_client,
        request_timeout_s=_request_timeout_s(args.request_timeout),
        ignore_eos=not args.no_ignore_eos, text_prompts=args.text_prompts,
        max_client_lag_ms=args.max_client_lag_ms, min_gap_share=args.min_gap_share,
        early_stop=args.early_stop, throughput_ci=args.throughput_ci, itl_ci=args.itl_ci,
        max_requests=args.max_requests, think_time_ms=args.think_time_ms,
        client_priority=args.client_priority,
        itl_metric="itl_per_token" if args.itl_per_token else "itl")
    slo = SLO(ttft_p99_ms=args.slo_ttft_ms, itl_p99_ms=args.slo_itl_ms,
              tpot_ms=args.slo_tpot_ms, e2el_ms=args.slo_e2el_ms)
    return workload, load, slo


def _trace(args: argparse.Namespace) -> tuple[str | None, str | None, float | None]:
    """``--trace FILE`` resolved, its sha256 and the replay's speed-up (None, None, None for
    another workload). The file is read here, as `tuner study create` reads a study's
    trace (a FIFO, a device, a huge or malformed file is one line, exit 2, before a request
    is sent), and the read at bench time refuses a file whose digest has changed since."""
    if args.workload != "trace":
        if args.trace or args.speedup is not None:
            raise UsageError(f"--{'trace' if args.trace else 'speedup'} replays a trace: add "
                             "--workload trace")
        return None, None, None
    if not args.trace:
        raise UsageError("--workload trace needs --trace FILE (a Mooncake JSONL or Azure CSV "
                         "file)")
    path = Path(args.trace).resolve()
    return str(path), load_trace(path).sha256, 1.0 if args.speedup is None else args.speedup


def _request_timeout_s(text: str) -> float:
    seconds = duration_s(text)
    if seconds is None:
        raise UsageError(f"--request-timeout {text!r} is not a duration; use e.g. 90s, 10m, 6h")
    return seconds


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most ten times a second."""

    def __init__(self, stream=sys.stderr) -> None:
        self.stream, self.start, self.drawn = stream, time.monotonic(), 0.0

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if now - self.drawn < 0.1 and done != total:
            return
        self.drawn = now
        elapsed = now - self.start
        if total:
            filled = int(30 * done / total)
            bar = "#" * filled + "." * (30 - filled)
            self.stream.write(f"\r[{bar}] {done}/{total} requests {elapsed:6.1f} s")
        else:
            self.stream.write(f"\r{done} requests {elapsed:6.1f} s")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def run(args: argparse.Namespace) -> int:
    workload, load, slo = specs(args)
    bar = None if args.no_progress else ProgressBar()
    result = asyncio.run(_bench(args.url.rstrip("/"), args.model, workload, load, slo, bar,
                                args.time_scale))
    if bar is not None:
        bar.close()
    print(format_summary(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result.to_dict(), indent=2))
    if result.metrics["completed"] == 0:  # invalid_reason: "no request succeeded: reasons"
        raise BenchmarkError(f"{result.invalid_reason}; first error: "
                             f"{(result.errors or ['?'])[0][:300]}")
    if not result.valid:
        log.warning("tuner: warning: this run is not valid: %s", result.invalid_reason)
    return 0


async def _bench(url, model, workload, load, slo, bar, time_scale):
    model = model or await fetch_model(url, min(MODEL_TIMEOUT_S, load.request_timeout_s))
    return await run_benchmark(url, model, workload, load, slo=slo, progress=bar,
                               time_scale=time_scale)

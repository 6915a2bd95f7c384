"""Cross-checking a trial's measurement with vLLM's own benchmark on the same server.

With ``engine.crosscheck_trials = N`` a worker's first N launched trials also run
`vllm bench serve` (random prompts of the study's lengths, the same request count and
concurrency, ignore_eos) right after our load generator, before the server stops; its
figures are stored beside ours (user attribute ``vllm_bench``) so the two can be compared
on the same runs. Only for the random workload on /v1/completions. With the early stop our
run's length varies; vLLM's then sends as many requests as our run right before it (the
last confirmation run, else the first) completed, since whole-run figures depend on the
share of the run spent in the ramp and the drain, and that run is the one it is compared
with (``TrialRecord.last_run``; the first run on a fresh server reads apart,
docs/loadgen.md). With ``engine.crosscheck_repeats = N > 1`` vLLM's benchmark runs N
times back to back: the stored figures stay the first run's (the one right after ours) and
``runs`` holds every run's, so the comparison can show vLLM's own spread beside the
difference between the clients (``spread``). Each of vLLM's runs on a server draws its own
prompts (the study's seed, stepped per run): vLLM's random dataset with one seed gives
the same first prompts whatever their count, which a server with prefix caching would
serve from its cache on the second run.

Each run is ``python -m vllm.entrypoints.cli.main bench serve ...`` of the engine's Python,
started by a ``Spawn`` (``tuner.engine.supervisor``): plainly, or with ``engine.start =
"preimported"`` forked from the slot's supervisor of vLLM's CLI (``BENCH_ALSO`` imported
with it), so that a run does not pay the import of vLLM and torch again (about as long as
a short level).

With a load ladder the trial's own benchmark is its curve, so vLLM's runs go where the
curve decides: open-loop Poisson arrivals (``--request-rate``, no concurrency limit) at the
two offered rates that bracket the trial's capacity (``bracket_rates``), as many requests
as a level of ``capacity.level_s`` seconds sends; stored as ``levels``, one entry per rate.
At each rate the two clients take turns on the server, ``crosscheck_repeats`` rounds of our
level then vLLM's run: the comparison is then between clients on runs of one length, right
after one another, not between a ladder level and a later run, and the rounds give each
client's own spread (a short level's p99 ITL near capacity moves from run to run: decision
0036). An entry holds vLLM's first run's figures, ``runs`` (every vLLM run's, when
repeated) and ``ours`` (our levels' figures, ``tuner.trials.curve.Level``, one a round).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tuner.engine.supervisor import Process, Spawn, plain_start
from tuner.loadgen.ladder import level_requests
from tuner.loadgen.plan import RUN_SEED_STEP
from tuner.spec.study import StudySpec
from tuner.trials.curve import Curve
from tuner.trials.record import TrialRecord

# What `vllm bench serve` imports only when it runs: a pre-imported supervisor imports it too.
BENCH_ALSO = ("vllm.benchmarks.serve",)
# Enough of `vllm bench serve`'s output to hold its traceback's end, small enough to store.
OUTPUT_TAIL_CHARS = 1500

KEYS = ("output_throughput", "request_throughput", "total_token_throughput", "completed",
        "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms",
        "p99_itl_ms", "median_tpot_ms", "median_e2el_ms", "duration")


def applicable(spec: StudySpec) -> bool:
    return (spec.engine.kind == "vllm" and spec.workload.kind == "random"
            and spec.workload.endpoint == "completions")


def num_prompts(told: TrialRecord) -> int | None:
    """How many requests vLLM's run sends: as many as our run right before it completed
    (None: the study's count)."""
    sent = told.last_run.get("completed")
    return int(sent) if sent else None


def bracket_rates(curve: Curve | None) -> tuple[float, ...]:
    """The offered rates that bracket ``curve``'s capacity, in increasing order: the
    highest level that held and the lowest measured level above it that did not. Where
    every level above held, the upper end is the warm-up's saturated throughput, the
    ladder's own bound (``tuner.loadgen.ladder``: it is never a level, since an open loop
    there has no steady state; both clients should see it miss the SLOs). Either end is
    missing where the curve has none (no level held; no level failed above it and no
    saturated throughput above it)."""
    levels = curve.measured if curve is not None else ()
    held = curve.capacity_level if curve is not None else None
    low = held.offered_rps if held is not None else None
    above = [lv.offered_rps for lv in levels if not lv.held
             and (low is None or lv.offered_rps > low)]
    high = min(above, default=None)
    sat = curve.saturated_rps if curve is not None else None
    if high is None and low is not None and sat is not None and sat > low:
        high = sat
    return tuple(r for r in (low, high) if r is not None)


def command(spec: StudySpec, url: str, model: str, result_dir: Path,
            num_prompts: int | None = None, request_rate: float | None = None,
            run: int = 0) -> list[str]:
    """`vllm bench serve`'s argv for vLLM's ``run``-th run on a server (its prompts' seed):
    the study's closed loop (``max_concurrency``, warm-up requests), or with
    ``request_rate`` one open-loop ladder level (Poisson arrivals at that rate, no
    concurrency limit, no warm-up: the server is warm after the ladder)."""
    w = spec.workload
    cmd = [spec.engine.python, "-m", "vllm.entrypoints.cli.main", "bench", "serve",
           "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
           "--model", model, "--tokenizer", spec.model.path, "--dataset-name", "random",
           "--random-input-len", str(w.input_len), "--random-output-len", str(w.output_len),
           "--random-range-ratio", str(w.range_ratio),
           "--num-prompts", str(num_prompts or w.num_requests),
           "--ignore-eos", "--seed", str(w.seed + run * RUN_SEED_STEP),
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
           "--save-result", "--result-dir", str(result_dir), "--result-filename", "r.json",
           "--disable-tqdm"]
    if request_rate is not None:
        return cmd + ["--num-warmups", "0", "--request-rate", f"{request_rate:g}"]
    cmd += ["--num-warmups", str(w.warmup_requests)]
    if w.max_concurrency:
        cmd += ["--max-concurrency", str(w.max_concurrency)]
    return cmd


def run(spec: StudySpec, url: str, model: str, env: dict[str, str],
        num_prompts: int | None = None, starter: Spawn = plain_start) -> dict[str, Any]:
    """vLLM's figures for the same workload (``num_prompts`` requests, else the study's
    count): the first run's, with ``runs`` (every run's) when the study repeats it; or
    {"error": ...} when the first run failed (a later run's failure ends the repeats and is
    kept as ``repeat_error``). Never raises."""
    first = _run_once(spec, url, model, env, num_prompts, run=0, starter=starter)
    repeats = spec.engine.crosscheck_repeats
    if "error" in first or repeats < 2:
        return first
    runs = [first]
    while len(runs) < repeats:
        again = _run_once(spec, url, model, env, num_prompts, run=len(runs), starter=starter)
        if "error" in again:
            return {**first, "runs": runs, "repeat_error": again["error"]}
        runs.append(again)
    return {**first, "runs": runs}


# Our level's figures at (rate, round): run on the same server by the caller.
OurLevel = Callable[[float, int], Mapping[str, Any]]


def run_levels(spec: StudySpec, url: str, model: str, env: dict[str, str],
               rates: tuple[float, ...], ours: OurLevel | None = None,
               say: Callable[[str], None] | None = None,
               starter: Spawn = plain_start) -> dict[str, Any]:
    """The clients' figures at each of ``rates`` as ladder levels (``command`` with a
    request rate), in order: ``{"levels": [{"request_rate": r, **vLLM's first run's
    figures or "error", "runs": [...], "ours": [...]}, ...]}``; per rate
    ``crosscheck_repeats`` rounds of ``ours(rate, k)`` then vLLM's run (a failed vLLM
    run ends that rate's rounds), each announced through ``say`` ("crosscheck 2/6 at 24.7
    req/s: vLLM"). Never raises for vLLM's failures."""
    levels, run = [], 0
    rounds = spec.engine.crosscheck_repeats
    total = len(rates) * rounds
    for i, rate in enumerate(rates):
        n = level_requests(rate, spec.capacity.level_s)
        vllm: list[dict[str, Any]] = []
        mine: list[Mapping[str, Any]] = []
        for k in range(rounds):
            step = f"crosscheck {i * rounds + k + 1}/{total} at {rate:.3g} req/s"
            if ours is not None:
                if say is not None:
                    say(f"{step}: ours")
                mine.append(ours(rate, k))
            if say is not None:
                say(f"{step}: vLLM")
            got = _run_once(spec, url, model, env, n, rate, run, starter)
            run += 1
            if "error" in got:
                if not vllm:
                    vllm.append(got)
                break
            vllm.append(got)
        entry: dict[str, Any] = {"request_rate": rate, **vllm[0]}
        if len(vllm) > 1:
            entry["runs"] = vllm
        if mine:
            entry["ours"] = mine
        levels.append(entry)
    return {"levels": levels}


def spread(vllm: Mapping[str, Any], key: str) -> tuple[float, float, float] | None:
    """vLLM's own range of ``key`` over its repeated runs: (low, high, (high - low) / the
    median); None with fewer than two runs."""
    values = [float(r[key]) for r in vllm.get("runs") or () if r.get(key) is not None]
    if len(values) < 2:
        return None
    mid = statistics.median(values)
    return min(values), max(values), (max(values) - min(values)) / mid if mid else 0.0


def _run_once(spec: StudySpec, url: str, model: str, env: dict[str, str],
              num_prompts: int | None, request_rate: float | None = None,
              run: int = 0, starter: Spawn = plain_start) -> dict[str, Any]:
    """One `vllm bench serve` run (``command``) started by ``starter`` in its own process
    group, output to a log beside its result: the result's ``KEYS``, or {"error": ...}
    with the log's tail when it could not run, exited non-zero or outlasted
    ``engine.benchmark_timeout_s`` (then its whole group is killed)."""
    with tempfile.TemporaryDirectory(prefix="tuner-crosscheck-") as tmp:
        cmd = command(spec, url, model, Path(tmp), num_prompts, request_rate, run)
        log = Path(tmp) / "bench.log"
        try:
            proc = starter(cmd, env, log)
        except OSError as e:
            return {"error": f"vllm bench serve did not run: {e}"}
        try:
            code = proc.wait(timeout=spec.engine.benchmark_timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return {"error": "vllm bench serve did not run: it outlasted "
                             f"{spec.engine.benchmark_timeout_s:g} s"}
        if code != 0:
            tail = log.read_text(errors="replace")[-OUTPUT_TAIL_CHARS:]
            return {"error": f"vllm bench serve exited {code}: {tail}"}
        data = json.loads((Path(tmp) / "r.json").read_text())
    return {k: data[k] for k in KEYS if k in data}


def _kill_group(proc: Process) -> None:
    """SIGKILL a started run's process group (it leads its own) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process in D state
        pass

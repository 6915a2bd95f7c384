"""The simulator's error along real latency-vs-load ladders (issue 49, part 3), per level.

    .venv/bin/python bench/sim_ladder_error.py        # or: make bench-sim-ladder
    .venv/bin/python bench/sim_ladder_error.py --time-scale 1 --gpus h100   # faster

Reads every measured ladder, ``results/<gpu>/rate-ladders/<config>-summary.json`` (written
from ``scripts/gpu/rate_ladder.py``'s runs: one `vllm serve` start, a discarded warm-up of
128 requests at once, then `vllm bench serve` with Poisson arrivals at each offered rate and
512 requests at once, the saturated ``inf`` level), and every measured trial's curve in a
capacity study, ``results/<gpu>/capacity/study.db`` (tuner's own ladder: a saturated
closed-loop warm-up, then its levels in the order measured, each with its own seed; a
level's throughput is over its steady window, the replay's over the run), and replays each
on the simulator:
``python -m tuner.sim serve --gpu <gpu>`` with the configuration's flags on the 8B-shaped
model folder (``tuner model make --shape 8b``), one warm-up run as the real one, then the
load generator (``tuner.loadgen.run_benchmark``) at each real level with its request count,
lengths, burstiness and seed. The simulator runs ``--time-scale`` times faster than real
time; the load generator sends at the offered rate times the scale and reports its figures
back in simulated time (``to_simulated_time``). ITL and TTFT are read from the simulator's
own trace (``--sim-trace``: each token's modelled time, in simulated time), since a client
or server starved of CPU on a busy machine adds delays the model does not make; the load
generator's own p99s are reported beside them as the check.

Per configuration and level: real and simulated p99 ITL, p99 TTFT, median ITL, median TTFT
and output throughput, with the relative error (simulated / real - 1), and the capacity at
the issue's SLO pairs from each curve (``capacity``). A configuration is *fitted* when its
ladder was used to fit the simulator's constants (``FITTED``), else *held out*; today none
is: the constants were fitted on saturated closed loops only. Writes
bench/results/sim-ladder-error.md and .json.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench/results/sim-ladder-error"
# (gpu folder, configuration) pairs whose ladders fitted the simulator's constants. Empty:
# profiles.toml was fitted on saturated closed loops (bench/calibrate_sim.py), no ladder.
FITTED: frozenset[tuple[str, str]] = frozenset()
# The SLO pairs: (p99 ITL limit ms, p99 TTFT limit ms).
SLO_PAIRS = ((25.0, 1000.0), (50.0, 1000.0))
METRICS = ("p99_itl_ms", "p99_ttft_ms", "median_itl_ms", "median_ttft_ms",
           "output_throughput")
# rate_ladder.py's workload, for a level whose per-request file is missing.
INPUT_LEN, OUTPUT_LEN, FIRST_SEED = 1024, 128, 100
VOCAB = 128256  # the 8B folder's vocabulary


@dataclass(frozen=True)
class Level:
    """One rung of a ladder: the offered rate (inf: all at once), what was sent, the figures
    (vLLM's result keys, in simulated time for the simulator)."""

    rate: float
    requests: int
    input_len: int
    output_len: int
    burstiness: float
    seed: int
    figures: dict[str, float]


@dataclass(frozen=True)
class Ladder:
    gpu: str  # the results folder's name, also the simulator's profile
    config: str
    flags: tuple[str, ...]
    warmup: Level | None
    levels: tuple[Level, ...]

    @property
    def fitted(self) -> bool:
        return (self.gpu, self.config) in FITTED


# ---- pure -----------------------------------------------------------------------------------

def rel_error(model: float, measured: float) -> float:
    """``model / measured - 1``; nan when either is missing or the measurement is 0."""
    if not (measured and math.isfinite(measured) and math.isfinite(model)):
        return math.nan
    return model / measured - 1.0


def holds(figures: dict[str, float], itl_ms: float, ttft_ms: float) -> bool:
    return figures["p99_itl_ms"] <= itl_ms and figures["p99_ttft_ms"] <= ttft_ms


def capacity(levels: list[Level], itl_ms: float, ttft_ms: float) -> tuple[Level | None,
                                                                             Level | None]:
    """The bracket ``(held, missed)`` of a curve at an SLO pair: walking up the offered
    rates, the last level that holds before the first that misses, and that miss. ``held``
    None: the lowest level misses already; ``missed`` None: every level holds."""
    held = None
    for lv in sorted(levels, key=lambda lv: lv.rate):
        if not holds(lv.figures, itl_ms, ttft_ms):
            return held, lv
        held = lv
    return held, None


def rate_label(lv: Level) -> str:
    """An offered rate as the table writes it; the saturated level with what it achieved."""
    if math.isinf(lv.rate):
        return f"saturated ({lv.figures['request_throughput']:.1f} req/s)"
    return f"{lv.rate:g} req/s"


def bracket_text(held: Level | None, missed: Level | None) -> str:
    if missed is None:
        return f"at least {rate_label(held)}" if held else "no level"
    if held is None:
        return f"below {rate_label(missed)}"
    return f"between {rate_label(held)} and {rate_label(missed)}"


def same_bracket(real: tuple[Level | None, Level | None],
                 sim: tuple[Level | None, Level | None]) -> bool:
    rates = [tuple(lv.rate if lv else None for lv in b) for b in (real, sim)]
    return rates[0] == rates[1]


def level_rows(real: Ladder, sim: Ladder) -> list[dict[str, Any]]:
    """Per level: each metric's real and simulated value and the relative error."""
    return [{"rate": r.rate, "requests": r.requests,
             **{k: {"real": r.figures[k], "sim": s.figures[k],
                    "error": rel_error(s.figures[k], r.figures[k])} for k in METRICS}}
            for r, s in zip(real.levels, sim.levels)]


def capacity_rows(real: Ladder, sim: Ladder) -> list[dict[str, Any]]:
    rows = []
    for itl, ttft in SLO_PAIRS:
        a, b = (capacity(list(x.levels), itl, ttft) for x in (real, sim))
        rows.append({"p99_itl_ms": itl, "p99_ttft_ms": ttft, "real": bracket_text(*a),
                     "sim": bracket_text(*b), "same_bracket": same_bracket(a, b)})
    return rows


def _cell(m: dict[str, float], fmt: str) -> str:
    err = "n/a" if math.isnan(m["error"]) else f"{m['error']:+.0%}"
    return f"{fmt.format(m['real'])} / {fmt.format(m['sim'])} ({err})"


def checks_table(levels: list[dict[str, Any]], checks: list[dict[str, Any]]) -> str:
    """Whether the load generator read what the model says: the trace's p99s (reported)
    beside the load generator's, the server's late steps, the client's verdict."""
    out = ["| offered | sim p99 ITL ms, trace / client | sim p99 TTFT ms, trace / client | "
           "late steps | latest, wall ms | client |", "|---|---|---|---|---|---|"]
    for row, c in zip(levels, checks):
        rate = "inf" if math.isinf(row["rate"]) else f"{row['rate']:g} req/s"
        t = c["client"]
        verdict = "valid" if c["valid"] else f"invalid: {(c['invalid_reason'] or '')[:60]}"
        out.append(f"| {rate} | {row['p99_itl_ms']['sim']:.1f} / {t['p99_itl_ms']:.1f} | "
                   f"{row['p99_ttft_ms']['sim']:,.0f} / {t['p99_ttft_ms']:,.0f} | "
                   f"{c['late_steps']:g} | {c['max_late_ms']:.0f} | {verdict} |")
    return "\n".join(out)


def render(entries: list[dict[str, Any]], command: str, scale: float) -> str:
    """The markdown report: the command, then per configuration its levels and capacity."""
    out = [f"# The simulator along real rate ladders\n\n    {command}\n",
           "Real / simulated (simulated / real - 1). Simulated figures are in simulated time. "
           "Fitted: the ladder fitted the simulator's constants; held out: it did not "
           "(`FITTED` in bench/sim_ladder_error.py). The simulator ran at time scale "
           f"{scale:g}; its ITLs and TTFTs are from its own trace (modelled token times, free "
           "of CPU delays on a busy machine), its throughput from the load generator; below "
           "each configuration, the load generator's p99s beside the trace's.\n"]
    fmts = {"output_throughput": "{:,.0f}", "median_ttft_ms": "{:,.0f}",
            "p99_ttft_ms": "{:,.0f}"}
    for e in entries:
        flags = " ".join(e["flags"]) or "(vLLM's defaults)"
        out += [f"## {e['gpu']} / {e['config']}: {flags} ({e['role']})\n",
                "| offered | requests | p99 ITL ms | p99 TTFT ms | median ITL ms | "
                "median TTFT ms | output tok/s |", "|---|---|---|---|---|---|---|"]
        for row in e["levels"]:
            rate = "inf" if math.isinf(row["rate"]) else f"{row['rate']:g} req/s"
            out.append(f"| {rate} | {row['requests']} | " + " | ".join(
                _cell(row[k], fmts.get(k, "{:,.1f}")) for k in METRICS) + " |")
        out += ["", "| SLO pair | real capacity | simulated capacity | same bracket |",
                "|---|---|---|---|"]
        for c in e["capacity"]:
            out.append(f"| p99 ITL <= {c['p99_itl_ms']:g} ms, p99 TTFT <= "
                       f"{c['p99_ttft_ms'] / 1000:g} s | {c['real']} | {c['sim']} | "
                       f"{'yes' if c['same_bracket'] else '**no**'} |")
        out += ["", checks_table(e["levels"], e["checks"]), ""]
    return "\n".join(out)


def trace_figures(requests: list[dict[str, Any]], scale: float) -> dict[str, float]:
    """p99 / median ITL and TTFT (ms, simulated time) from the simulator's own trace
    (``/sim/trace``: per request when it reached the engine and each token's modelled due
    time): the model's figures without the client's or the server's CPU delays."""
    import numpy as np

    from tuner.testing.sim_trace import trace_itls_ms, trace_ttfts_ms

    ttfts, itls = trace_ttfts_ms(requests, scale), trace_itls_ms(requests, scale)
    pick = lambda xs, q: float(np.percentile(xs, q)) if xs else math.nan  # noqa: E731
    return {"p99_itl_ms": pick(itls, 99), "median_itl_ms": pick(itls, 50),
            "p99_ttft_ms": pick(ttfts, 99), "median_ttft_ms": pick(ttfts, 50)}


def max_lateness_ms(steps: list[list[float]], since: float) -> float:
    """The latest a step's tokens went out after their due time (wall ms), over the steps
    due from ``since`` (``/sim/trace``'s steps: due, lateness, ...). Beyond the engine's
    50 ms slack the modelled timeline itself shifts, and the trace's figures with it."""
    return max((st[1] * 1000 for st in steps if st[0] >= since), default=0.0)


def json_safe(value: Any) -> Any:
    """Strict JSON: an infinite rate as ``"inf"``, a missing error (nan) as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value == math.inf else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


# ---- I/O ------------------------------------------------------------------------------------

def _rate(value: Any) -> float:
    return math.inf if value in ("inf", None) else float(value)


def read_level(folder: Path, entry: dict[str, Any], seed: int) -> Level:
    """A summary's level; the workload from its per-request file where it is present."""
    detail: dict[str, Any] = {}
    path = folder / str(entry.get("file") or "")
    if path.is_file() and path.suffix == ".gz":
        with gzip.open(path) as f:
            detail = json.load(f)
    ins, outs = detail.get("input_lens") or [INPUT_LEN], detail.get("output_lens") or [OUTPUT_LEN]
    return Level(rate=_rate(entry["request_rate"]),
                 requests=int(detail.get("num_prompts") or entry["completed"]),
                 input_len=round(sum(ins) / len(ins)), output_len=round(sum(outs) / len(outs)),
                 burstiness=float(detail.get("burstiness") or 1.0), seed=seed,
                 figures={k: float(entry[k]) for k in (*METRICS, "request_throughput")})


def read_ladders(gpus: list[str] | None = None) -> list[Ladder]:
    """Every ``results/h*/rate-ladders/*-summary.json``; seeds as rate_ladder.py gave them."""
    ladders = []
    for path in sorted(ROOT.glob("results/h*/rate-ladders/*-summary.json")):
        gpu = path.parents[1].name
        if gpus and gpu not in gpus:
            continue
        data = json.loads(path.read_text())
        warm = [e for e in data["levels"] if "warmup" in str(e.get("file"))]
        rungs = [e for e in data["levels"] if e not in warm]
        ladders.append(Ladder(
            gpu, str(data["config"]), tuple(data["flags"]),
            read_level(path.parent, warm[0], 1) if warm else None,
            tuple(read_level(path.parent, e, FIRST_SEED + k) for k, e in enumerate(rungs))))
    return ladders


def read_study_ladders(gpus: list[str] | None = None) -> list[Ladder]:
    """Every measured trial's curve in ``results/h*/capacity/study.db``, as a ladder: its
    launch flags (the command after the port, less ``--load-format``), the warm-up as a
    level of the study's requests at once, and each level with the seed the trial's ladder
    gave it (``tuner.capacity.run.LEVEL_SEED_STEP``)."""
    import optuna

    from tuner.capacity.run import LEVEL_SEED_STEP
    from tuner.storage.studies import SPEC
    from tuner.trials import from_frozen

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ladders = []
    for path in sorted(ROOT.glob("results/h*/capacity/study.db")):
        gpu = path.parents[1].name
        if gpus and gpu not in gpus:
            continue
        url = f"sqlite:///{path}"
        for summary in optuna.get_all_study_summaries(url):
            study = optuna.load_study(study_name=summary.study_name, storage=url)
            w = study.user_attrs[SPEC]["workload"]
            for t in study.trials:
                r = from_frozen(t)
                if r.curve is None or not r.measured:
                    continue
                ladders.append(Ladder(gpu, f"{summary.study_name}-trial-{t.number}",
                                      launch_flags(r.command),
                                      Level(math.inf, int(w["num_requests"]), w["input_len"],
                                            w["output_len"], 1.0, w["seed"], {}),
                                      tuple(curve_level(lv, w, w["seed"] + k * LEVEL_SEED_STEP)
                                            for k, lv in enumerate(r.curve.levels, 1))))
    return ladders


def launch_flags(command: tuple[str, ...]) -> tuple[str, ...]:
    """A trial's engine flags from its server argv: what follows ``--port N``, less the
    ``--load-format`` pair (the simulator has no weights to load)."""
    rest = list(command[command.index("--port") + 2:])
    if "--load-format" in rest:
        i = rest.index("--load-format")
        del rest[i:i + 2]
    return tuple(rest)


def curve_level(lv: Any, workload: dict[str, Any], seed: int) -> Level:
    """A stored ladder level (``tuner.trials.curve.Level``) as this benchmark's level."""
    figures = {"p99_itl_ms": lv.p99_itl_ms, "p99_ttft_ms": lv.p99_ttft_ms,
               "median_itl_ms": lv.p50_itl_ms, "median_ttft_ms": lv.p50_ttft_ms,
               "output_throughput": lv.output_throughput,
               "request_throughput": lv.achieved_rps}
    return Level(lv.offered_rps, int(lv.requests), workload["input_len"],
                 workload["output_len"], 1.0, seed,
                 {k: math.nan if v is None else float(v) for k, v in figures.items()})


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name):
                return float(line.split()[-1])
    return math.nan


def run_level(url: str, model: str, lv: Level, scale: float) -> tuple[Level, dict[str, Any]]:
    """One level on the running simulator, its figures in simulated time: ITL and TTFT from
    the simulator's trace (the model's token times: on a busy machine a starved client or
    server adds its own delays to what the load generator reads), throughputs from the load
    generator; and the checks: the load generator's own figures, its verdict, late steps."""
    from tuner.loadgen import LoadSpec, WorkloadSpec, run_benchmark

    workload = WorkloadSpec(kind="random", input_len=lv.input_len, output_len=lv.output_len,
                            vocab_size=VOCAB, seed=lv.seed)
    load = LoadSpec(request_rate=lv.rate * scale, burstiness=lv.burstiness,
                    max_concurrency=None, num_requests=lv.requests, warmup_requests=0)
    late = _metric(url, "tuner_sim:late_steps_total")
    r = asyncio.run(run_benchmark(url, model, workload, load, time_scale=scale))
    with urllib.request.urlopen(url + "/sim/trace", timeout=60) as resp:
        trace = json.loads(resp.read())
    mine = trace["requests"][-lv.requests:]
    traced = trace_figures(mine, scale)
    client = {k: float(r.metrics[k]) for k in (*METRICS, "request_throughput")}
    check = {"valid": r.valid, "invalid_reason": r.invalid_reason,
             "completed": r.metrics["completed"], "failures": r.failures,
             "late_steps": _metric(url, "tuner_sim:late_steps_total") - late,
             "max_late_ms": max_lateness_ms(trace["steps"],
                                            min((q["submitted"] for q in mine), default=0.0)),
             "client": client}
    figures = {**client, **traced}  # latencies the model's own; throughputs the client's
    return Level(lv.rate, lv.requests, lv.input_len, lv.output_len, lv.burstiness, lv.seed,
                 figures), check


def simulate(ladder: Ladder, scale: float,
             pin: list[str]) -> tuple[Ladder, list[dict[str, Any]]]:
    """The ladder replayed on a fresh `python -m tuner.sim serve` with its flags (``pin``:
    its ``--sim-cpus``, or none)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_sim import free_port, wait_ready

    from tuner.modelfolder import write_model_folder

    model = str(write_model_folder(Path(tempfile.mkdtemp()) / "llama3-8b", "8b"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "tuner.sim", "serve", "--model", model,
                             "--port", str(port), "--gpu", ladder.gpu, "--time-scale",
                             str(scale), "--sim-trace", *pin, *ladder.flags],
                            stdout=subprocess.DEVNULL)
    try:
        asyncio.run(wait_ready(url, proc))
        warm = run_level(url, model, ladder.warmup, scale)[0] if ladder.warmup else None
        done = []
        for lv in ladder.levels:
            done.append(run_level(url, model, lv, scale))
            print(f"  {ladder.config} {lv.rate:g}: p99 ITL {done[-1][0].figures['p99_itl_ms']:.1f}"
                  f" ms, {done[-1][1]}", file=sys.stderr, flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return (Ladder(ladder.gpu, ladder.config, ladder.flags, warm,
                   tuple(lv for lv, _ in done)), [c for _, c in done])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-scale", type=float, default=0.5,
                    help="the simulator's speed against real time (default 0.5: a busy "
                         "2-core machine keeps pace; the report's trace column shows if not)")
    ap.add_argument("--gpus", nargs="+", help="only these results folders (e.g. h100)")
    args = ap.parse_args(argv)
    cpus, pin = sorted(os.sched_getaffinity(0)), []
    if len(cpus) >= 2:  # the server on the last CPU, the client on the others
        pin = ["--sim-cpus", str(cpus[-1])]
        os.sched_setaffinity(0, cpus[:-1])
    command = "python bench/sim_ladder_error.py " + " ".join(argv or sys.argv[1:])
    started, entries = time.monotonic(), []
    for real in [*read_ladders(args.gpus), *read_study_ladders(args.gpus)]:
        sim, checks = simulate(real, args.time_scale, pin)
        entries.append({"gpu": real.gpu, "config": real.config, "flags": list(real.flags),
                        "role": "fitted" if real.fitted else "held out",
                        "levels": level_rows(real, sim), "capacity": capacity_rows(real, sim),
                        "checks": checks})
    text = render(entries, command.strip(), args.time_scale)
    print(text)
    OUT.with_suffix(".md").write_text(text)
    OUT.with_suffix(".json").write_text(json.dumps(json_safe(
        {"command": command.strip(), "time_scale": args.time_scale,
         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         "wall_s": round(time.monotonic() - started, 1), "configurations": entries}),
        indent=1))
    print(f"wrote {OUT.relative_to(ROOT)}.md and .json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

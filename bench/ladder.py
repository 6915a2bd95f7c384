"""Benchmark: does the load ladder find a server's capacity under SLOs, and at what cost?

On the simulator (`python -m tuner.sim serve`), for each profile (a simulated GPU and
flags; the last one held out: the SLOs and ladder settings were chosen on the others, and it
is reported apart):

- truth: a grid of long open-loop runs, coarse from ``--grid-low`` to ``--grid-high`` x
  the saturated throughput, then fine (``--fine`` relative steps) inside the coarse
  bracket. Each run's p99 TTFT and p99 ITL (over the whole run, as the SLO and ``vllm
  bench serve`` define them) and its latency trend (whether the server kept up) are
  noisy, and the highest rate whose run happened to hold is biased up (the old rule, still
  reported as "highest held"). In steady state each is non-decreasing in the rate, so the
  truth fits each, as a share of its limit (the SLO; the ladder's tolerance for the
  trend), with a non-decreasing (isotonic) regression over the grid, and the capacity is
  the highest grid rate at which every fit is within its limit (``monotone_capacity``);
- the ladder (``tuner.capacity.run_ladder``), once per seed, each on a fresh server with
  prompts and arrivals of its own (another seed): its error against the truth, and the
  repeat error (max - min) / mean over the seeds (``--seeds``; |c1 - c2| / mean for two);
- its cost: wall seconds of warm-up + levels (the start excluded) against one of today's
  single closed-loop benchmarks on a fresh server (``--today-requests`` at the same
  concurrency, with its warm-up requests).

Medians with their range over the tuned profiles; the held-out profile on its own rows.
Writes bench/results/ladder.json and ladder.md (generated), the command first.

    .venv/bin/python bench/ladder.py [--small] [--time-scale 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import isotonic_regression

from tuner.loadgen import SLO, LoadSpec, WorkloadSpec, run_benchmark
from tuner.capacity.run import level_load, run_ladder
from tuner.loadgen.ladder import LadderPlan
from tuner.testing.sim_server import MODEL_NAME, sim_server

RESULTS = Path(__file__).with_name("results")
CLIENT = {"max_client_lag_ms": 50.0}  # a shared machine: the client may lag (simulated ms)
FAILED_SHARE = 10.0  # a run with failed requests, in shares of every limit


@dataclass(frozen=True)
class Profile:
    name: str
    flags: tuple[str, ...]
    held_out: bool = False


PROFILES = (
    Profile("l4", ("--gpu", "l4")),
    Profile("l4-budget-256", ("--gpu", "l4", "--max-num-batched-tokens", "256")),
    Profile("l4-seqs-16", ("--gpu", "l4", "--max-num-seqs", "16")),
    Profile("l4-eager", ("--gpu", "l4", "--enforce-eager"), held_out=True),
)


def workload(seed: int) -> WorkloadSpec:
    return WorkloadSpec(input_len=512, output_len=64, vocab_size=128256, seed=seed)


def closed_loop(args, requests: int) -> LoadSpec:
    return LoadSpec(max_concurrency=args.concurrency, num_requests=requests, warmup_requests=8,
                    **CLIENT)


def slos(args) -> SLO:
    return SLO(ttft_p99_ms=args.ttft_slo, itl_p99_ms=args.itl_slo)


async def grid_run(url: str, rate: float, args, ts: float, seed: int) -> dict:
    """One long open-loop run: whether it held, and the p99s that decided it."""
    load = level_load(closed_loop(args, 1), rate, args.grid_s, ts)
    r = await run_benchmark(url, MODEL_NAME, workload(seed), load, slo=slos(args),
                            time_scale=ts)
    m = r.metrics
    return {"held": bool(r.valid and m.get("slo_met") == 1.0 and not m.get("failed")),
            "p99_ttft_ms": m.get("p99_ttft_ms"), "p99_itl_ms": m.get("p99_itl_ms"),
            "latency_trend": (r.window or {}).get("latency_trend"),
            "completed": m.get("completed"), "failed": m.get("failed"),
            "valid": r.valid, "invalid_reason": r.invalid_reason}


def monotone_capacity(grid: dict[float, dict], args) -> float:
    """The highest valid grid rate at which the non-decreasing fits of p99 TTFT / SLO,
    p99 ITL / SLO and latency trend / tolerance are all at most 1 (0 when none is); a run
    with failed requests counts as far past every limit."""
    rates = sorted(r for r, run in grid.items() if run["valid"])
    if not rates:
        return 0.0
    limits = (("p99_ttft_ms", args.ttft_slo), ("p99_itl_ms", args.itl_slo),
              ("latency_trend", LadderPlan().tolerance))
    ok = np.ones(len(rates), dtype=bool)
    for key, limit in limits:
        share = [FAILED_SHARE if grid[r].get("failed") else (grid[r].get(key) or 0.0) / limit
                 for r in rates]
        ok &= isotonic_regression(share, increasing=True).x <= 1.0
    within = [r for r, good in zip(rates, ok) if good]
    return max(within) if within else 0.0


async def truth(url: str, args, ts: float) -> dict:
    """The grid: saturated throughput, then coarse and fine open-loop runs."""
    warm = await run_benchmark(url, MODEL_NAME, workload(1), closed_loop(args, args.warmup),
                               time_scale=ts)
    sat = warm.metrics["request_throughput"]
    grid: dict[float, dict] = {}
    coarse = np.linspace(args.grid_low, args.grid_high, args.coarse) * sat
    for k, rate in enumerate(coarse):
        grid[float(rate)] = await grid_run(url, rate, args, ts, 100 + k)
    lo = monotone_capacity(grid, args) or coarse[0] / 2
    above = [r for r in grid if r > lo]
    hi = min(above) if above else lo
    rate, k = lo * (1 + args.fine), 0
    while rate < hi:
        grid[float(rate)] = await grid_run(url, rate, args, ts, 200 + k)
        rate, k = rate * (1 + args.fine), k + 1
    held = [r for r, run in grid.items() if run["held"]]
    return {"saturated_rps": sat, "capacity_rps": monotone_capacity(grid, args),
            "highest_held_rps": max(held) if held else 0.0,
            "grid": {f"{r:.4f}": run for r, run in sorted(grid.items())}}


async def one_ladder(profile: Profile, args, ts: float, seed: int) -> dict:
    with sim_server(Path(tempfile.mkdtemp()), *profile.flags, time_scale=ts) as url:
        t0 = time.monotonic()
        run = await run_ladder(url, MODEL_NAME, workload(seed), closed_loop(args, args.warmup),
                               slos(args), LadderPlan(stop_on_miss=args.stop_on_miss),
                               level_s=args.level_s, time_scale=ts)
        wall = time.monotonic() - t0
    return {"capacity_rps": run.curve.capacity_rps, "verdict": run.curve.verdict,
            "wall_s": wall, "curve": run.curve.to_json()}


async def today(profile: Profile, args, ts: float) -> float:
    """Wall seconds of one of today's closed-loop benchmarks (start excluded)."""
    with sim_server(Path(tempfile.mkdtemp()), *profile.flags, time_scale=ts) as url:
        t0 = time.monotonic()
        await run_benchmark(url, MODEL_NAME, workload(3),
                            closed_loop(args, args.today_requests), time_scale=ts)
        return time.monotonic() - t0


async def measure(profile: Profile, args, truths: dict[str, dict]) -> dict:
    """One profile's row: its truth (from ``truths`` when given there), its ladders (one
    per seed of ``args.seeds``) and their cost."""
    ts = args.time_scale
    true = truths.get(profile.name)
    if true is None:
        with sim_server(Path(tempfile.mkdtemp()), *profile.flags, time_scale=ts) as url:
            true = await truth(url, args, ts)
    ladders = [await one_ladder(profile, args, ts, seed) for seed in args.seeds]
    caps = [lad["capacity_rps"] for lad in ladders]
    return {"profile": profile.name, "held_out": profile.held_out, "time_scale": ts,
            "truth": true, "ladders": ladders, "today_wall_s": await today(profile, args, ts),
            "errors": [c / true["capacity_rps"] - 1 if true["capacity_rps"] else None
                       for c in caps],
            "repeat_error": (np.ptp(caps) / np.mean(caps) if np.mean(caps) else 0.0)}


def spread(values: list[float]) -> str:
    v = [x for x in values if x is not None]
    if not v:
        return "n/a"
    return f"{np.median(v):.3f} [{min(v):.3f}, {max(v):.3f}] (n={len(v)})"


def grid_band(grid: dict[str, dict]) -> tuple[float, float] | None:
    """Where the truth's own long runs disagree: the lowest valid grid rate whose run
    failed and the highest whose run held, when the first lies below the second (None
    when the grid is monotone: every held run below every failed one)."""
    runs = [(float(rate), run["held"]) for rate, run in grid.items() if run["valid"]]
    failed = [rate for rate, held in runs if not held]
    held = [rate for rate, held in runs if held]
    if not failed or not held or min(failed) >= max(held):
        return None
    return min(failed), max(held)


def _band(r: dict) -> str:
    band, true = grid_band(r["truth"]["grid"]), r["truth"]["capacity_rps"]
    if band is None or not true:
        return "none"
    return f"{band[0] / true - 1:+.3f} to {band[1] / true - 1:+.3f}"


def report(rows: list[dict], command: str) -> str:
    lines = [f"    {command}", "", "| profile | truth rps | (highest held) | grid band | "
             "ladder rps | error | repeat | cost x today | levels |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        caps = " / ".join(f"{lad['capacity_rps']:.3f}" for lad in r["ladders"])
        errs = " / ".join("n/a" if e is None else f"{e:+.3f}" for e in r["errors"])
        cost = " / ".join(f"{lad['wall_s'] / r['today_wall_s']:.2f}" for lad in r["ladders"])
        levels = " / ".join(str(len(lad["curve"]["levels"])) for lad in r["ladders"])
        name = r["profile"] + (" (held out)" if r["held_out"] else "")
        lines.append(f"| {name} | {r['truth']['capacity_rps']:.3f} | "
                     f"{r['truth']['highest_held_rps']:.3f} | {_band(r)} | {caps} | {errs} | "
                     f"{r['repeat_error']:.3f} | {cost} | {levels} |")
    for label, group in (("tuned", [r for r in rows if not r["held_out"]]),
                         ("held out", [r for r in rows if r["held_out"]])):
        lines += ["", f"{label}: median [min, max] over profiles x runs",
                  f"- error vs truth: {spread([e for r in group for e in r['errors']])}",
                  "- |error| vs truth: " + spread([abs(e) for r in group for e in r["errors"]
                                                   if e is not None]),
                  f"- repeat error: {spread([r['repeat_error'] for r in group])}",
                  "- cost / today: " + spread([lad["wall_s"] / r["today_wall_s"]
                                               for r in group for lad in r["ladders"]])]
    lines += ["", "grid band: where single long runs of the truth's grid disagree (a failed run "
              "below a held one), relative to the fitted truth; an error inside it is within "
              "what the truth's own runs can tell."]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true",
                   help="a quick try: one tuned profile and the held-out one, a coarse grid")
    p.add_argument("--time-scale", type=float, default=8.0)
    p.add_argument("--level-s", type=float, default=45.0, help="a ladder level (server s)")
    p.add_argument("--grid-s", type=float, default=120.0, help="a grid run (server s)")
    p.add_argument("--grid-low", type=float, default=0.3, help="lowest coarse rate / saturated")
    p.add_argument("--grid-high", type=float, default=1.2, help="highest coarse rate / saturated")
    p.add_argument("--concurrency", type=int, default=128, help="the closed loops' clients")
    p.add_argument("--ttft-slo", type=float, default=1500.0, help="p99 TTFT SLO (ms)")
    p.add_argument("--itl-slo", type=float, default=250.0, help="p99 ITL SLO (ms)")
    p.add_argument("--coarse", type=int, default=6, help="coarse grid rates")
    p.add_argument("--fine", type=float, default=0.025, help="fine grid relative step")
    p.add_argument("--warmup", type=int, default=100, help="the ladder's warm-up requests")
    p.add_argument("--today-requests", type=int, default=LoadSpec().num_requests,
                   help="requests of today's closed-loop benchmark (LoadSpec's default)")
    p.add_argument("--profile", action="append", choices=[pr.name for pr in PROFILES],
                   help="only these profiles (repeatable; default: all)")
    p.add_argument("--seeds", type=lambda v: [int(x) for x in v.split(",")],
                   default=[11, 12], help="the ladders' prompt seeds (comma-separated)")
    p.add_argument("--no-stop-on-miss", dest="stop_on_miss", action="store_false",
                   help="levels run whole even once their SLO miss is certain")
    p.add_argument("--truth-from", type=Path,
                   help="reuse the truth grids of an earlier run's JSON (same settings)")
    p.add_argument("--out", default="ladder")
    p.add_argument("--report", action="store_true",
                   help="only write OUT.md again from OUT.json (no run)")
    args = p.parse_args()
    if args.report:
        saved = json.loads((RESULTS / f"{args.out}.json").read_text())
        text = report(saved["rows"], saved["command"])
        (RESULTS / f"{args.out}.md").write_text(text)
        print(text)
        return 0
    profiles = tuple(pr for pr in PROFILES if not args.profile or pr.name in args.profile)
    if args.small:
        profiles = (PROFILES[0], PROFILES[-1])
        args.grid_s, args.coarse, args.fine = 60.0, 4, 0.1
    command = ".venv/bin/python bench/ladder.py " + shlex.join(sys.argv[1:])
    truths = ({row["profile"]: row["truth"]
               for row in json.loads(args.truth_from.read_text())["rows"]}
              if args.truth_from else {})
    rows = []
    for profile in profiles:
        print(f"== {profile.name}", flush=True)
        rows.append(asyncio.run(measure(profile, args, truths)))
        print(json.dumps({k: rows[-1][k] for k in ("errors", "repeat_error")}), flush=True)
    text = report(rows, command)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(
        {"command": command, "args": {**vars(args), "truth_from": str(args.truth_from)},
         "rows": rows}, indent=1))
    (RESULTS / f"{args.out}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: does the load ladder find a server's capacity under SLOs, and at what cost?

On the simulator (`python -m tuner.sim serve`), for each profile (a simulated GPU and
flags; the last one held out: the SLOs and ladder settings were chosen on the others, and it
is reported apart):

- truth: a grid of long open-loop runs, coarse from ``--grid-low`` to ``--grid-high`` x
  the saturated throughput, then fine (``--fine`` relative steps) inside the coarse
  bracket. Each run is judged as a ladder's level is (``tuner.capacity.run.level_of``:
  the SLO's one verdict on its steady p99s, with their intervals, and its backlog), and
  the truth's capacity and interval are the same fit over the whole grid
  (``tuner.trials.curve.Curve.estimate``): many long runs, so a narrow interval. The
  highest rate whose run happened to hold (biased up) is still reported;
- the ladder (``tuner.capacity.run_ladder``), once per seed, each on a fresh server with
  prompts and arrivals of its own (another seed): its capacity's interval against the
  truth's (coverage: the two overlap), the interval's width over its point, whether
  every pair of the same profile's ladders overlap (repeats), and the point's error;
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

from tuner.loadgen import SLO, LoadSpec, WorkloadSpec, run_benchmark
from tuner.capacity.run import level_load, level_of, run_ladder
from tuner.loadgen.ladder import LadderPlan
from tuner.slo import Capacity
from tuner.testing.sim_server import MODEL_NAME, sim_server
from tuner.trials.curve import Curve, Level

RESULTS = Path(__file__).with_name("results")
ARGS = argparse.Namespace(ttft_slo=1500.0, itl_slo=250.0)  # the run's, set by main()
CLIENT = {"max_client_lag_ms": 50.0}  # a shared machine: the client may lag (simulated ms)


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
    """One long open-loop run, judged as a ladder's level (its JSON)."""
    load = level_load(closed_loop(args, 1), rate, args.grid_s, ts)
    r = await run_benchmark(url, MODEL_NAME, workload(seed), load, slo=slos(args),
                            time_scale=ts)
    return level_of(rate, r, slos(args).judged(LadderPlan().tolerance)).to_json()


def grid_curve(grid: dict) -> Curve:
    """The grid's runs as one curve judged at the bench's SLO (every run a level)."""
    levels = tuple(Level.from_json(run) for run in grid.values())
    slo = {"p99_ttft_ms": ARGS.ttft_slo, "p99_itl_ms": ARGS.itl_slo}
    return Curve(levels=levels, tolerance=LadderPlan().tolerance, slo=slo)


def estimate_json(est: Capacity | None) -> dict:
    """The estimate's figures; None for each when no level was usable (every one measured
    the client)."""
    if est is None:
        return {"capacity_rps": None, "lower": None, "upper": None, "censored": None}
    return {"capacity_rps": est.point, "lower": est.lower, "upper": est.upper,
            "censored": est.censored}


async def truth(url: str, args, ts: float) -> dict:
    """The grid: saturated throughput, then coarse and fine open-loop runs, and the fit."""
    warm = await run_benchmark(url, MODEL_NAME, workload(1), closed_loop(args, args.warmup),
                               time_scale=ts)
    sat = warm.metrics["request_throughput"]
    grid: dict[float, dict] = {}
    coarse = np.linspace(args.grid_low, args.grid_high, args.coarse) * sat
    for k, rate in enumerate(coarse):
        grid[float(rate)] = await grid_run(url, rate, args, ts, 100 + k)
    lo = grid_curve(grid).capacity_rps or coarse[0] / 2
    above = [r for r in grid if r > lo]
    hi = min(above) if above else lo
    rate, k = lo * (1 + args.fine), 0
    while rate < hi:
        grid[float(rate)] = await grid_run(url, rate, args, ts, 200 + k)
        rate, k = rate * (1 + args.fine), k + 1
    held = [r for r, run in grid.items() if run.get("held")]
    return {"saturated_rps": sat, **estimate_json(grid_curve(grid).estimate()),
            "highest_held_rps": max(held) if held else 0.0,
            "grid": {f"{r:.4f}": run for r, run in sorted(grid.items())}}


async def one_ladder(profile: Profile, args, ts: float, seed: int) -> dict:
    with sim_server(Path(tempfile.mkdtemp()), *profile.flags, time_scale=ts) as url:
        t0 = time.monotonic()
        run = await run_ladder(url, MODEL_NAME, workload(seed), closed_loop(args, args.warmup),
                               slos(args), LadderPlan(stop_on_miss=args.stop_on_miss),
                               level_s=args.level_s, time_scale=ts)
        wall = time.monotonic() - t0
    return {**estimate_json(run.curve.estimate()), "verdict": run.curve.verdict,
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
    caps = [lad["capacity_rps"] for lad in ladders if lad["capacity_rps"] is not None]
    pairs = [(a, b) for i, a in enumerate(ladders) for b in ladders[i + 1:]]
    return {"profile": profile.name, "held_out": profile.held_out, "time_scale": ts,
            "truth": true, "ladders": ladders, "today_wall_s": await today(profile, args, ts),
            "errors": [lad["capacity_rps"] / true["capacity_rps"] - 1
                       if true["capacity_rps"] and lad["capacity_rps"] is not None else None
                       for lad in ladders],
            "covered": [overlap(lad, true) for lad in ladders],
            "widths": [width(lad) for lad in ladders],
            "repeats_overlap": [overlap(a, b) for a, b in pairs],
            "repeat_error": (np.ptp(caps) / np.mean(caps) if caps and np.mean(caps) else None)}


def overlap(a: dict, b: dict) -> bool | None:
    """Whether two estimates' intervals overlap (None when either has none)."""
    if a.get("lower") is None or b.get("lower") is None:
        return None
    return a["lower"] <= b["upper"] and b["lower"] <= a["upper"]


def width(est: dict) -> float | None:
    if est.get("lower") is None or not est.get("capacity_rps"):
        return None
    return (est["upper"] - est["lower"]) / est["capacity_rps"]


def share(flags: list[bool | None]) -> str:
    known = [f for f in flags if f is not None]
    return f"{sum(known)}/{len(known)}" if known else "n/a"


def spread(values: list[float]) -> str:
    v = [x for x in values if x is not None]
    if not v:
        return "n/a"
    return f"{np.median(v):.3f} [{min(v):.3f}, {max(v):.3f}] (n={len(v)})"


def grid_band(grid: dict[str, dict]) -> tuple[float, float] | None:
    """Where the truth's own long runs disagree: the lowest valid grid rate whose run
    failed and the highest whose run held, when the first lies below the second (None
    when the grid is monotone: every held run below every failed one)."""
    runs = [(float(rate), bool(run.get("held"))) for rate, run in grid.items()
            if run.get("valid", run.get("invalid_reason") is None)]
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
    lines = [f"    {command}", "", "| profile | truth rps [interval] | (highest held) | "
             "grid band | ladder rps | error | covered | width | repeats overlap | repeat | "
             "cost x today | levels |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        caps = " / ".join("n/a" if lad["capacity_rps"] is None else f"{lad['capacity_rps']:.3f}"
                          for lad in r["ladders"])
        t = r["truth"]
        tint = (f"{t['capacity_rps']:.3f} [{t['lower']:.3f}, {t['upper']:.3f}]"
                if t.get("lower") is not None else f"{t['capacity_rps']:.3f}")
        widths = " / ".join("n/a" if w is None else f"{w:.3f}" for w in r["widths"])
        errs = " / ".join("n/a" if e is None else f"{e:+.3f}" for e in r["errors"])
        cost = " / ".join(f"{lad['wall_s'] / r['today_wall_s']:.2f}" for lad in r["ladders"])
        levels = " / ".join(str(len(lad["curve"]["levels"])) for lad in r["ladders"])
        name = r["profile"] + (" (held out)" if r["held_out"] else "")
        lines.append(f"| {name} | {tint} | {t['highest_held_rps']:.3f} | {_band(r)} | "
                     f"{caps} | {errs} | {share(r['covered'])} | {widths} | "
                     f"{share(r['repeats_overlap'])} | "
                     f"{'n/a' if r['repeat_error'] is None else format(r['repeat_error'], '.3f')} | "
                     f"{cost} | "
                     f"{levels} |")
    for label, group in (("tuned", [r for r in rows if not r["held_out"]]),
                         ("held out", [r for r in rows if r["held_out"]])):
        lines += ["", f"{label}: median [min, max] over profiles x runs",
                  f"- error vs truth: {spread([e for r in group for e in r['errors']])}",
                  "- |error| vs truth: " + spread([abs(e) for r in group for e in r["errors"]
                                                   if e is not None]),
                  "- repeat error: " + spread([r["repeat_error"] for r in group]),
                  "- covered (interval overlaps the truth's): "
                  + share([c for r in group for c in r["covered"]]),
                  "- interval width / point: "
                  + spread([w for r in group for w in r["widths"]]),
                  "- repeats overlap (pairs of one profile's ladders): "
                  + share([c for r in group for c in r["repeats_overlap"]]),
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
                   default=[11, 12, 13, 14, 15],
                   help="the ladders' prompt seeds (comma-separated)")
    p.add_argument("--no-stop-on-miss", dest="stop_on_miss", action="store_false",
                   help="levels run whole even once their SLO miss is certain")
    p.add_argument("--truth-from", type=Path,
                   help="reuse the truth grids of an earlier run's JSON (same settings)")
    p.add_argument("--out", default="ladder")
    p.add_argument("--report", action="store_true",
                   help="only write OUT.md again from OUT.json (no run)")
    args = p.parse_args()
    ARGS.__dict__.update(vars(args))
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

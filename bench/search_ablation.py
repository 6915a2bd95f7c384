"""Does each rule of the front sampler earn its place? An ablation on the search benchmark.

Each rule of ``FrontSettings`` (its boolean fields, ``FrontSettings.rules()``) is switched off
alone, and the sampler so changed runs as a contender beside the default (every rule on),
on the same profiles, rule sets and seeds as ``bench/search.py`` runs them. Rules that act
only between parallel workers (``PARALLEL``) are ablated with 4 workers, against the
default with 4 workers. Every run is scored as the benchmark scores (HV@20 of the
SLO-feasible points over the best known front: the grid plus every point any run here
measured).

A rule's removal *costs* the median HV@20 with it on less the median with it off; the
seeds' spread is the range (max - min) of HV@20 with it on. A rule whose removal costs
less than that spread on every profile and rule set is a candidate to go (issue 43).
Run the main profiles first, then the held-out ones (``--held-out``), looked at only
afterwards and reported apart.

    nice -n 10 .venv/bin/python bench/search_ablation.py --seeds 3 --trials 20 \\
        --profiles llama3-8b-h200 chat-shared-prefix-h200
    nice -n 10 .venv/bin/python bench/search_ablation.py --held-out --seeds 3 --trials 20

Writes bench/results/search-ablation{,-held-out}.json (every run) and .md (the table).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import search  # noqa: E402
from contenders.plan import PLANS  # noqa: E402
from search_report import summarise  # noqa: E402
from search_run import Contender, run_one  # noqa: E402
from search_slo import slo_view  # noqa: E402
from search_truth import HELD_OUT, PROFILES, RULE_SETS, model_version  # noqa: E402
from tuner.search.front import FrontSettings  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
PARALLEL = ("believer", "claim_check")  # rules that act only while another trial is asked
WORKERS = 4  # the parallel rules' ablation runs this many workers, as "front x4" does


def contenders(rules, noise: float = 0.0) -> list[Contender]:
    """The default, then the default with each rule off (a parallel rule's with
    ``WORKERS`` workers, after the default with as many); every one told its metrics with
    ``noise`` (relative, as the benchmark's "front 5% noise")."""
    plan = PLANS["auto"]
    out = [Contender("front", plan, noise=noise)]
    out += [Contender(f"-{r}", plan, noise=noise, settings=((r, False),)) for r in rules
            if r not in PARALLEL]
    parallel = [r for r in rules if r in PARALLEL]
    if parallel:
        out.append(Contender(f"front x{WORKERS}", plan, workers=WORKERS, noise=noise))
        out += [Contender(f"-{r} x{WORKERS}", plan, workers=WORKERS, noise=noise,
                          settings=((r, False),)) for r in parallel]
    return out


def _job(args: tuple) -> tuple[dict, str, dict]:
    name, rules, c, seed, trials = args
    profile, truth = search._truth(name, rules)
    t0 = time.perf_counter()
    run = run_one(profile, truth, c, seed, trials)
    run.update(profile=name, rules=rules, contender=c.name, seed=seed,
               wall_s=time.perf_counter() - t0)
    new, truth.new = truth.new, {}
    return run, name, new


def run_all(profiles, chosen: list[Contender], seeds: int, trials: int, processes: int,
            log) -> list[dict]:
    """Every contender on every profile, rule set and seed (the ground truth cached)."""
    with Pool(processes) as pool:
        search.ground_truth(profiles, pool, log)
        jobs = [(name, rules, c, seed, trials) for name in profiles for rules in RULE_SETS
                for c in chosen for seed in range(seeds)]
        runs = []
        for i, (run, name, new) in enumerate(pool.imap_unordered(_job, jobs)):
            search._truth(name, "vllm-v1")[1].merge(new)
            runs.append(run)
            if (i + 1) % 20 == 0 or i + 1 == len(jobs):
                log(f"runs {i + 1}/{len(jobs)}")
    for name in profiles:
        search._TRUTHS[name].save()
    return runs


def rows(data: dict) -> dict[tuple[str, str, str], list[float]]:
    """HV@20 by seed (seed order) per (profile, rules, contender), SLO-feasible score."""
    return {(r["profile"], r["rules"], r["contender"]):
            [r["hv20_by_seed"][s] for s in sorted(r["hv20_by_seed"])]
            for r in summarise(slo_view(data))}


def verdicts(hv: dict, base: str, name: str, keys) -> dict[str, float | bool]:
    """For one ablated contender against ``base`` over the (profile, rules) ``keys``: the
    largest cost of its removal in units of the seeds' spread (cost / spread), and whether
    the cost stays below the spread everywhere (a candidate to go)."""
    worst = -np.inf
    for k in keys:
        on, off = hv[(*k, base)], hv[(*k, name)]
        cost = float(np.median(on) - np.median(off))
        spread = float(max(on) - min(on))
        worst = max(worst, cost / spread if spread > 0 else (np.inf if cost > 0 else 0.0))
    return {"worst": worst, "candidate": bool(worst < 1.0)}


def _cell(v: list[float]) -> str:
    return f"{np.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"


def table(data: dict) -> list[str]:
    """The markdown table: per rule, HV@20 median (min-max over seeds) with it off, per
    profile and rule set, the default's row first; the cost (on - off median) beside."""
    hv = rows(data)
    keys = sorted({(p, r) for p, r, _ in hv})
    names = [c["name"] for c in data["contenders"]]
    head = " | ".join(f"{p} {r}" for p, r in keys)
    lines = [f"| rule off | {head} | worst cost / spread | candidate to go |",
             "|---|" + "---|" * (len(keys) + 2)]
    for name in names:
        base = f"front x{WORKERS}" if name.endswith(f"x{WORKERS}") else "front"
        cells = []
        for k in keys:
            v = hv[(*k, name)]
            cost = "" if name == base else f" [{np.median(hv[(*k, base)]) - np.median(v):+.2f}]"
            cells.append(_cell(v) + cost)
        if name == base:
            lines.append(f"| (none: {name}) | {' | '.join(cells)} | | |")
            continue
        v = verdicts(hv, base, name, keys)
        lines.append(f"| `{name.lstrip('-')}` | {' | '.join(cells)} | {v['worst']:.2f} | "
                     f"{'yes' if v['candidate'] else 'no'} |")
    return lines


def _noise(noise: float) -> str:
    return f"told metrics with {noise:.0%} noise (scored on the true ones), " if noise else ""


def write_table(data: dict, path: Path) -> None:
    which = "held-out" if data["held_out"] else "main"
    text = [f"# The front sampler's rules, each switched off alone ({which} profiles)", "",
            f"`{data['command']}` on simulator source `{data['simulator']}`: "
            f"{data['seeds']} seeds, {data['trials']} trials, "
            f"{_noise(data.get('noise', 0.0))}one worker unless named "
            f"(x{WORKERS}: the parallel rules, against the default with {WORKERS} workers).",
            "Each cell: HV@20 (SLO-feasible, over the best known front) median (min-max over "
            "seeds) with the rule off; [the cost of its removal: the default's median less "
            "this one]. A rule whose cost stays below the default's min-max spread on "
            "every column is a candidate to go (worst cost / spread < 1).", ""]
    path.write_text("\n".join(text + table(data)) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--profiles", nargs="*", default=None,
                    help="default: the main profiles (--held-out: the held-out ones)")
    ap.add_argument("--held-out", action="store_true", help="the held-out profiles")
    ap.add_argument("--rules", nargs="*", default=list(FrontSettings.rules()),
                    help="the rules to switch off (default: every one)")
    ap.add_argument("--noise", type=float, default=0.0,
                    help="the told metrics x (1 + NOISE * N(0, 1)), scored on the true ones")
    ap.add_argument("--out", default=None)
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the table from the JSON of the last run")
    args = ap.parse_args(argv)
    out = Path(args.out or RESULTS / ("search-ablation" + ("-held-out" if args.held_out
                                                            else "")))
    if args.report_only:
        write_table(json.loads(out.with_suffix(".json").read_text()), out.with_suffix(".md"))
        return 0
    unknown = set(args.rules) - set(FrontSettings.rules())
    if unknown:
        ap.error(f"not a rule of FrontSettings: {', '.join(sorted(unknown))}")
    profiles = args.profiles or list(HELD_OUT if args.held_out else PROFILES)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    chosen = contenders(args.rules, args.noise)
    started = time.perf_counter()
    runs = run_all(profiles, chosen, args.seeds, args.trials, args.processes, log)
    data = {"trials": args.trials, "seeds": args.seeds, "held_out": args.held_out,
            "noise": args.noise,
            "command": shlex.join(["bench/search_ablation.py",
                                   *(argv if argv is not None else sys.argv[1:])]),
            "simulator": model_version(),
            "contenders": [{"name": c.name, "workers": c.workers,
                            "settings": dict(c.settings)} for c in chosen],
            "fronts": search.fronts_of(profiles, runs), "runs": runs,
            "wall_s": time.perf_counter() - started, "processes": args.processes}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(data, default=str))
    write_table(data, out.with_suffix(".md"))
    log(f"wrote {out}.json/.md in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

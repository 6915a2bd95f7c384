"""Search efficiency on the simulator's ground truth (``make bench-search``).

For each study profile x rule set x contender x seed: a 24-trial study with the real
runner's trial behaviour (``search_run.py``), scored as ``tuner`` scores a study: the
hypervolume of its SLO-feasible measured points relative to the best known front's
SLO-feasible part (the grid of ``search_truth.GRID_AXES`` plus every configuration any run
measured), with the study's whole-front reference point (``tuner.trials.reference``).
Secondary tables count every measured point, SLO or not, and keep the default's values as
the reference (the gain over vLLM's defaults). Held-out profiles (``search_truth.HELD_OUT``)
are reported apart.

    .venv/bin/python bench/search.py [--seeds 10] [--trials 24] [--processes 1]

Writes bench/results/search.json (every run), search.md (the tables), search.png
(SLO-feasible) and search-all.png (every measured point).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")  # GPSampler's torch on 2 busy cores

from search_report import write_plot, write_table  # noqa: E402
from search_run import Contender, run_one  # noqa: E402
from search_slo import slo_view  # noqa: E402
from search_truth import (GRID_AXES, HELD_OUT, PROFILES, RULE_SETS, Truth,  # noqa: E402
                          default_outcome, front_volume, grid_flags, load_profile,
                          model_version, point, whole_front_reference)
from contenders.plan import PLANS, SearchPlan  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

GP_ONLY = "llama3-8b-h200/vllm-v1"  # GPSampler and BoTorch: one profile, three seeds
SLOW = ("gp", "botorch")  # run apart (bench/results/search-{gp,botorch}.json) and merged
WARM = dict(n_startup_trials=8, warm_start=True)
CONTENDERS: tuple[Contender, ...] = (
    Contender("random", SearchPlan("random")),
    Contender("random-60", SearchPlan("random"), trials=60,
              note="random search run on to 60 trials: its trials to 90% for the ratio"),
    Contender("tpe+warm+constraints", SearchPlan("tpe", **WARM), seeds=5,
              note="TPE, baselines first, constraints told"),
    Contender("gp", SearchPlan("gp", **WARM), seeds=3, only=GP_ONLY,
              note="Optuna's GPSampler: baselines first, constraints told (set_constraint), "
                   "the space's log scales; seconds per proposal, --merge"),
    Contender("botorch", SearchPlan("botorch", **WARM), seeds=3, only=GP_ONLY,
              note="optuna-integration's BoTorchSampler (qEHVI): baselines first, constraints "
                   "told (set_constraint), the space's log scales; seconds per proposal, --merge"),
    Contender("local", SearchPlan("local", **WARM),
              note="the previous default: pattern moves around vLLM's defaults + TPE"),
    Contender("front", SearchPlan("front", **WARM),
              note="the default: probes, then EHVI under GPs of both objectives and feasibility"),
    Contender("front 5% noise", SearchPlan("front", **WARM), noise=0.05,
              note="told values x (1 + 0.05 N(0,1)), scored on the true ones"),
    Contender("front x4", SearchPlan("front", **WARM), workers=4,
              note="4 parallel workers (Kriging believer)"),
)

# The contender whose plan is the study's default (contenders.plan.PLANS["auto"])
DEFAULT = next(c.name for c in CONTENDERS if c.plan == PLANS["auto"])

_TRUTHS: dict[str, Truth] = {}


def _truth(name: str, rules: str) -> tuple:
    profile = load_profile(name, rules)
    if name not in _TRUTHS:
        _TRUTHS[name] = Truth(profile)
    truth = _TRUTHS[name]
    truth.profile = profile
    return profile, truth


def _grid_job(args: tuple) -> tuple[str, dict]:
    name, chunk = args
    _, truth = _truth(name, "vllm-v1")
    for flags in chunk:
        truth.outcome(flags)
    new, truth.new = truth.new, {}
    return name, new


def _run_job(args: tuple) -> tuple[dict, str, dict]:
    name, rules, ci, seed, trials = args
    profile, truth = _truth(name, rules)
    c = CONTENDERS[ci]
    t0 = time.perf_counter()
    run = run_one(profile, truth, c, seed, c.trials or trials)
    run.update(profile=name, rules=rules, contender=c.name, seed=seed,
               wall_s=time.perf_counter() - t0)
    new, truth.new = truth.new, {}
    return run, name, new


def ground_truth(names, pool, log) -> dict[str, list[dict]]:
    """Evaluate every grid point of every profile (cached on disk)."""
    jobs, grids = [], {}
    for name in names:
        flags = []
        for rules in RULE_SETS:
            flags += grid_flags(load_profile(name, rules))
        uniq = {json.dumps(f, sort_keys=True): f for f in flags}
        grids[name] = list(uniq.values())
        _, truth = _truth(name, "vllm-v1")
        todo = [f for f in grids[name] if truth.known.get(_key(f)) is None]
        jobs += [(name, todo[i:i + 25]) for i in range(0, len(todo), 25)]
    log(f"grid: {sum(len(g) for g in grids.values())} points, {sum(len(j[1]) for j in jobs)} "
        "to evaluate")
    for i, (name, new) in enumerate(pool.imap_unordered(_grid_job, jobs)):
        _TRUTHS[name].merge(new)
        if i % 10 == 0:
            log(f"  grid chunk {i + 1}/{len(jobs)}")
    for name in names:
        _TRUTHS[name].save()
    return grids


def _key(flags) -> str:
    from tuner.trials import record
    return record.flags_key(flags)


def _workloads(profiles) -> dict[str, dict]:
    return {n: json.loads(load_profile(n, "vllm-v1").workload.model_dump_json()) for n in profiles}


def fronts_of(profiles, runs: list[dict]) -> dict[str, dict]:
    """Per profile/rules: both references and the hypervolumes of the grid and of the best
    known front (the grid plus every point the runs measured)."""
    fronts = {}
    for name in profiles:
        for rules in RULE_SETS:
            profile, truth = _truth(name, rules)
            ref = whole_front_reference(truth)
            own = point(default_outcome(truth))
            grid_pts = [p for p in (point(truth.outcome(f)) for f in grid_flags(profile)) if p]
            run_pts = [(-p[0], p[1]) for r in runs if r["profile"] == name and r["rules"] == rules
                       for p in r["points"] if p]
            fronts[f"{name}/{rules}"] = {
                "reference": [-ref[0], ref[1]],
                "grid_points": len(grid_flags(profile)),
                "hv_grid": front_volume(grid_pts, ref),
                "hv_best_known": front_volume(grid_pts + run_pts, ref),
                "default": {"reference": [-own[0], own[1]],
                            "hv_grid": front_volume(grid_pts, own),
                            "hv_best_known": front_volume(grid_pts + run_pts, own)},
                "workload": json.loads(profile.workload.model_dump_json()),
                "held_out": name in HELD_OUT,
            }
    return fronts


def merge_into(out: Path, paths, log) -> dict:
    """The last run's JSON with the runs of ``paths`` added (same simulator source) and the
    fronts computed again."""
    data = json.loads(out.with_suffix(".json").read_text())
    profiles = sorted({r["profile"] for r in data["runs"]})
    have = {r["contender"] for r in data["runs"]}
    for path in paths:
        old = earlier(Path(path), profiles, data["trials"], log)
        data["runs"] += [r for r in old["runs"] if r["contender"] not in have]
        # a contender added to CONTENDERS after the last run: its entry from its own file
        ran, named = {r["contender"] for r in data["runs"]}, {c["name"] for c in data["contenders"]}
        data["contenders"] += [c for c in old["contenders"] if c["name"] in ran - named]
    data["fronts"] = fronts_of(profiles, data["runs"])
    data["merged"] = list(paths)
    return data


def earlier(path: Path, profiles, trials: int, log) -> dict:
    """An earlier JSON's runs (on ``profiles``) and contenders, when it was made on this
    simulator source (else none)."""
    none: dict = {"runs": [], "contenders": []}
    if not path.is_file():
        log(f"merge: {path} is missing; left out")
        return none
    old = json.loads(path.read_text())
    fronts = {k.split("/")[0]: f["workload"] for k, f in old.get("fronts", {}).items()}
    if (old.get("simulator") != model_version() or old["trials"] != trials
            or any(fronts.get(n, w) != w for n, w in _workloads(profiles).items())):
        log(f"merge: {path} was made on another simulator source or trial count; left out")
        return none
    return {"runs": [r for r in old["runs"] if r["profile"] in profiles],
            "contenders": old.get("contenders", [])}


def write_reports(data: dict, out: Path) -> None:
    """search.md (the score tuner reports: SLO-feasible points; then, secondary, every
    measured point and the default's values as the reference), search.png (SLO-feasible)
    and search-all.png (every measured point)."""
    slo = slo_view(data)
    write_table(data, slo, out.with_suffix(".md"))
    write_plot(slo, out.with_suffix(".png"), "SLO-feasible points")
    write_plot(data, out.with_name(out.name + "-all.png"), "every measured point")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--all-seeds", action="store_true",
                    help="every contender on --seeds seeds (else TPE is capped at 5, "
                         "GPSampler and BoTorch at 3, the others at 10)")
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--profiles", nargs="*", default=list(PROFILES + HELD_OUT))
    ap.add_argument("--contenders", nargs="*", default=None)
    ap.add_argument("--out", default=str(RESULTS / "search"))
    ap.add_argument("--merge", nargs="*", default=[],
                    help="JSON of earlier runs on the same simulator source to score with these "
                         "(the slow samplers: bench/results/search-gp.json, search-botorch.json)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the table and the plot from the JSON of the last run")
    args = ap.parse_args(argv)
    out = Path(args.out)
    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    if args.report_only:
        data = (merge_into(out, args.merge, log) if args.merge
                else json.loads(out.with_suffix(".json").read_text()))
        if args.merge:
            out.with_suffix(".json").write_text(json.dumps(data, default=str))
        write_reports(data, out)
        return 0

    def seeds(c: Contender) -> int:
        return args.seeds if args.all_seeds else min(args.seeds, c.seeds)

    chosen = [i for i, c in enumerate(CONTENDERS)
              if (c.name not in SLOW if args.contenders is None else c.name in args.contenders)]
    started = time.perf_counter()
    with Pool(args.processes) as pool:
        ground_truth(args.profiles, pool, log)
        jobs = [(name, rules, ci, seed, args.trials) for name in args.profiles
                for rules in RULE_SETS for ci in chosen
                for seed in range(seeds(CONTENDERS[ci]))
                if CONTENDERS[ci].only in (None, f"{name}/{rules}")]
        # slow samplers first, so that the pool ends evenly
        jobs.sort(key=lambda j: CONTENDERS[j[2]].name not in SLOW)
        runs = []
        for i, (run, name, new) in enumerate(pool.imap_unordered(_run_job, jobs)):
            _truth(name, "vllm-v1")[1].merge(new)
            runs.append(run)
            if (i + 1) % 20 == 0 or i + 1 == len(jobs):
                log(f"runs {i + 1}/{len(jobs)}")
    for path in args.merge:
        runs += earlier(Path(path), args.profiles, args.trials, log)["runs"]
    for name in args.profiles:
        _TRUTHS[name].save()
    fronts = fronts_of(args.profiles, runs)
    data = {"trials": args.trials, "seeds": args.seeds, "grid_axes": GRID_AXES,
            "command": shlex.join(["bench/search.py",
                                   *(argv if argv is not None else sys.argv[1:])]),
            "simulator": model_version(), "default_contender": DEFAULT,
            "contenders": [{"name": c.name, "plan": c.plan and c.plan.__dict__,
                            "workers": c.workers, "seeds": seeds(c), "only": c.only,
                            "note": c.note, "trials": c.trials or args.trials,
                            "noise": c.noise}
                           for c in CONTENDERS],
            "fronts": fronts, "runs": runs, "wall_s": time.perf_counter() - started,
            "processes": args.processes, "merged": args.merge}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(data, default=str))
    write_reports(data, out)
    log(f"wrote {out}.json/.md/.png in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

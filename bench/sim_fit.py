"""The simulator's step-time constants fitted on one GPU's real rate ladders, each ladder
held out in turn (issue 65).

    .venv/bin/python bench/sim_fit.py            # H100: the report and a proposed profile
    .venv/bin/python bench/sim_fit.py --write    # ... and the profile into profiles.toml

Reads every ladder of ``results/<gpu>/rate-ladders/`` with its per-request files and
replays them offline (``sim_ladder_replay.py``). For each ladder in turn it fits ``PARAMS``
on the others and replays the one left out with the fitted values: that ladder's
*held-out* error, per level. Then it fits on every ladder: the proposed profile, written
to ``bench/results/sim-fit-<gpu>.toml`` as profiles.toml's ``[engine_by_gpu.<gpu>]`` table
(``--write`` puts it there; nothing else writes that table).

The fit is ``scipy.optimize.least_squares`` (bounded, soft-L1 loss) on the log errors
``log(model / real)`` of median ITL, p99 ITL, p99 TTFT and median TTFT at every level below
saturation: the saturated level is reported, never fitted. Every fit starts from
profiles.toml's ``[engine]`` values, never from an earlier fit, so a run repeats.

The report (``bench/results/sim-fit.md`` and ``.json``) has, per ladder and level, the
real figure, the model's with profiles.toml's ``[engine]`` constants (*before*) and with
the constants fitted without that ladder (*held out*); the capacity brackets at the SLO
pairs; a summary against ``TARGETS``; and every measured capacity-study curve of the GPU
(``results/<gpu>/capacity/study.db``: arrivals drawn as the load generator draws them, with
each level's seed) before and with the proposed profile, which no fit reads.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sim_ladder_replay import SLO_PAIRS, bracket, load, replay_requests, run  # noqa: E402

from tuner.sim.profiles import ENGINE_BY_GPU, PROFILES_FILE, engine_constants  # noqa: E402
from tuner.sim.serveargs import parse_engine_flags  # noqa: E402

OUT = ROOT / "bench/results/sim-fit"
# The fitted constants and their bounds: the decode step (bandwidth, fixed cost per step
# and per sequence), a prefill's compute, the launch costs of steps with prefill tokens (piecewise graphs up to
# the capture size, compiled kernels above it) and the API server's delay.
PARAMS = {"bandwidth_efficiency": (0.3, 1.0), "compute_efficiency": (0.3, 1.0),
          "step_overhead_ms": (0.0, 5.0), "per_sequence_overhead_us": (0.0, 200.0),
          "piecewise_launch_us_per_layer": (0.0, 200.0),
          "compiled_launch_us_per_layer": (0.0, 400.0), "front_end_ms": (0.0, 40.0)}
FITTED = ("median_itl_ms", "p99_itl_ms", "p99_ttft_ms", "median_ttft_ms")
# The targets on held-out ladders below saturation: |error| at most this.
TARGETS = {"median_itl_ms": 0.10, "p99_itl_ms": 0.15, "p99_ttft_ms": 0.20}
BRACKET_TARGET = 0.8  # share of (configuration, SLO pair) cases in the real bracket


def below_saturation(loaded):
    return [(g, c, f, [lv for lv in rungs if math.isfinite(lv[0])]) for g, c, f, rungs in loaded]


def residuals(values: dict[str, float], loaded) -> np.ndarray:
    """log(model / real) of the fitted figures at every level of ``loaded``."""
    return np.array([math.log(lv["model"][k] / lv["real"][k])
                     for e in run(loaded, values) for lv in e["levels"] for k in FITTED])


def start() -> dict[str, float]:
    """Where every fit starts: profiles.toml's ``[engine]`` values (the delay at 5 ms, off
    its bound)."""
    base = engine_constants()
    return {k: float(getattr(base, k)) or 5.0 for k in PARAMS}


def fit(loaded) -> dict[str, float]:
    """``PARAMS`` fitted on the levels below saturation of ``loaded`` (and nothing else)."""
    from scipy.optimize import least_squares

    names, fitting = list(PARAMS), below_saturation(loaded)
    x0 = [start()[k] for k in names]
    lo, hi = zip(*(PARAMS[k] for k in names))
    result = least_squares(lambda x: residuals(dict(zip(names, x)), fitting), x0,
                           bounds=(lo, hi), loss="soft_l1", f_scale=0.1, diff_step=0.02,
                           x_scale=[h - l for l, h in zip(lo, hi)], max_nfev=60)
    return {k: float(v) for k, v in zip(names, result.x)}


def _fold(args) -> tuple[str | None, dict[str, float]]:
    held, loaded = args
    return held, fit([lad for lad in loaded if lad[1] != held])


def leave_one_out(loaded, processes: int) -> tuple[dict[str, dict[str, float]],
                                                    dict[str, float]]:
    """The constants fitted without each ladder (by configuration), and on them all."""
    jobs = [(c, loaded) for _, c, _, _ in loaded] + [(None, loaded)]
    if processes <= 1:
        done = dict(map(_fold, jobs))
    else:
        with Pool(processes) as pool:
            done = dict(pool.map(_fold, jobs, chunksize=1))
    return {c: v for c, v in done.items() if c is not None}, done[None]


def capacity_curves(gpu: str, values: dict[str, float]) -> list[dict[str, Any]]:
    """Every measured capacity-study curve of ``gpu``, replayed with ``values``."""
    from sim_ladder_error import read_study_ladders

    from tuner.loadgen.arrivals import arrival_times

    out = []
    for lad in read_study_ladders([gpu]):
        flags = parse_engine_flags(list(lad.flags))
        levels = []
        for lv in lad.levels:
            starts = arrival_times(lv.requests, lv.rate, lv.burstiness, lv.seed)
            model = replay_requests(starts, [lv.input_len] * lv.requests,
                                    [lv.output_len] * lv.requests, flags, gpu, _consts(gpu, values))
            levels.append({"rate": lv.rate, "requests": lv.requests, "real": lv.figures,
                           "model": model})
        out.append({"config": lad.config, "flags": list(lad.flags), "levels": levels,
                    "capacity": [{"real": bracket(levels, "real", i, t),
                                  "model": bracket(levels, "model", i, t)}
                                 for i, t in SLO_PAIRS]})
    return out


def _consts(gpu: str, values: dict[str, float]):
    from sim_ladder_replay import constants

    return constants(gpu, values)


def profile_toml(gpu: str, values: dict[str, float], configs: list[str]) -> str:
    """The ``[engine_by_gpu.<gpu>]`` table of ``values``, each with its source."""
    source = (f"fitted on results/{gpu}/rate-ladders/ ({', '.join(configs)}) by "
              "bench/sim_fit.py; held-out errors: bench/results/sim-fit.md")
    lines = [f"[{ENGINE_BY_GPU}.{gpu}]",
             f"# Engine constants fitted on the {gpu}'s real rate ladders: they replace "
             "[engine]'s", "# for this GPU profile. Written by bench/sim_fit.py --write "
             "only."]
    lines += [f'{k} = {{ value = {v:.4g}, source = "{source}" }}' for k, v in values.items()]
    return "\n".join(lines) + "\n"


def write_profile(table: str, gpu: str, path: Path = PROFILES_FILE) -> None:
    """Put ``table`` in profiles.toml in place of that GPU's table (or at the end)."""
    text = path.read_text()
    pattern = re.compile(rf"^\[{ENGINE_BY_GPU}\.{re.escape(gpu)}\]\n(?:[^\[\n].*\n|\n)*",
                         re.M)
    if pattern.search(text):
        text = pattern.sub(table + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + table
    path.write_text(text.rstrip("\n") + "\n")


def summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the levels below saturation: per target figure, the median |error|, the range
    of the signed error and how many levels meet the target; and the brackets that agree."""
    levels = [lv for e in entries for lv in e["levels"] if math.isfinite(lv["rate"])]
    out: dict[str, Any] = {}
    for k, limit in TARGETS.items():
        err = np.array([lv["error"][k] for lv in levels])
        out[k] = {"median_abs": float(np.median(np.abs(err))), "min": float(err.min()),
                  "max": float(err.max()), "within": int((np.abs(err) <= limit).sum()),
                  "levels": len(err)}
    cases = [c for e in entries for c in e["capacity"]]
    out["brackets"] = {"same": sum(c["real"] == c["model"] for c in cases),
                       "cases": len(cases)}
    return out


def repeats(loaded) -> list[dict[str, Any]]:
    """Each ladder whose flags an earlier ladder already ran, read as the earlier one's
    "model": how far two real runs of one configuration are apart, in ``run``'s form."""
    entries, first = [], {}
    for gpu, config, flags, rungs in loaded:
        key = (gpu, tuple(flags))
        if key not in first:
            first[key] = (config, rungs)
            continue
        earlier, base = first[key]
        levels = [{"rate": ra, "real": a, "model": b,
                   "error": {k: b[k] / a[k] - 1 for k in a}}
                  for (ra, _, a), (rb, _, b) in zip(base, rungs) if ra == rb]
        finite = [lv for lv in levels if math.isfinite(lv["rate"])]
        entries.append({"config": f"{config} against {earlier}", "levels": levels,
                        "capacity": [{"real": bracket(finite, "real", i, t),
                                      "model": bracket(finite, "model", i, t)}
                                     for i, t in SLO_PAIRS]})
    return entries


def summary_rows(label: str, s: dict[str, Any]) -> str:
    cells = [f"{s[k]['median_abs']:.0%} [{s[k]['min']:+.0%}, {s[k]['max']:+.0%}]; "
             f"{s[k]['within']} of {s[k]['levels']} within {TARGETS[k]:.0%}" for k in TARGETS]
    b = s["brackets"]
    return (f"| {label} | " + " | ".join(cells) +
            f" | {b['same']} of {b['cases']} ({b['same'] / max(b['cases'], 1):.0%}) |")


def level_table(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    keys = (*TARGETS, "median_ttft_ms")
    lines = ["| offered req/s | requests | " + " | ".join(
        f"{k}: real / before / held out" for k in keys) + " |", "|---" * (2 + len(keys)) + "|"]
    for b, a in zip(before["levels"], after["levels"]):
        cells = [f"{b['real'][k]:,.1f} / {b['model'][k]:,.1f} ({b['error'][k]:+.0%}) / "
                 f"{a['model'][k]:,.1f} ({a['error'][k]:+.0%})" for k in keys]
        lines.append(f"| {b['rate']:g} | {b['requests']} | " + " | ".join(cells) + " |")
    lines += ["", "| SLO pair | real | before | held out |", "|---|---|---|---|"]
    lines += [f"| p99 ITL <= {i:g} ms, p99 TTFT <= {t:g} ms | {cb['real']} | {cb['model']} | "
              f"{ca['model']} |" for (i, t), cb, ca in zip(SLO_PAIRS, before["capacity"],
                                                          after["capacity"])]
    return lines


def curves_table(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    lines = ["| trial | offered req/s | p99 ITL ms: real / before / proposed | "
             "p99 TTFT ms: real / before / proposed | median ITL ms: real / before / proposed |",
             "|---|---|---|---|---|"]
    for b, a in zip(before, after):
        for lb, la in zip(b["levels"], a["levels"]):
            cells = [f"{lb['real'][k]:,.1f} / {lb['model'][k]:,.1f} / {la['model'][k]:,.1f}"
                     for k in ("p99_itl_ms", "p99_ttft_ms", "median_itl_ms")]
            lines.append(f"| {b['config']} | {lb['rate']:g} | " + " | ".join(cells) + " |")
    same = [sum(c["real"] == c["model"] for e in x for c in e["capacity"]) for x in (before,
                                                                                     after)]
    cases = sum(len(e["capacity"]) for e in before)
    lines += ["", f"Capacity brackets that agree with the real curve's (SLO pairs as above): "
              f"{same[0]} of {cases} before, {same[1]} of {cases} with the proposed profile."]
    return lines


def render(gpu: str, command: str, folds: dict[str, dict[str, float]],
           proposed: dict[str, float], before: list[dict[str, Any]],
           after: list[dict[str, Any]], curves: tuple[list, list],
           repeats_: list[dict[str, Any]]) -> str:
    names = list(PARAMS)
    lines = [f"# The simulator fitted on the {gpu} rate ladders, each held out in turn", "",
             f"Generated by `{command}`. *before*: profiles.toml's `[engine]` constants; "
             "*held out*: the constants fitted on the other ladders. Below saturation "
             "(targets: |error| of median ITL <= 10 %, p99 ITL <= 15 %, p99 TTFT <= 20 %; "
             "capacity brackets agree for >= 80 %; the last row: two real runs of one "
             "configuration, the second read as the first's model):", "",
             "| constants | median ITL | p99 ITL | p99 TTFT | brackets agree |",
             "|---|---|---|---|---|", summary_rows("before", summary(before)),
             summary_rows("held out", summary(after)),
             *[summary_rows(f"real: {r['config']}", summary([r]))
               for r in repeats_], "",
             "Median |error| [range of the signed error]; brackets at p99 ITL <= 25 and "
             "50 ms with p99 TTFT <= 1 s, per (configuration, SLO pair).", "",
             "## The fitted constants", "",
             "| fitted without | " + " | ".join(names) + " |", "|---" * (1 + len(names)) + "|"]
    start_values = start()
    lines.append("| (start) | " + " | ".join(f"{start_values[k]:.4g}" for k in names) + " |")
    for c, v in folds.items():
        lines.append(f"| {c} | " + " | ".join(f"{v[k]:.4g}" for k in names) + " |")
    lines.append("| none (proposed) | " + " | ".join(f"{proposed[k]:.4g}" for k in names)
                 + " |")
    for b, a in zip(before, after):
        lines += ["", f"## {gpu} {b['config']} (flags: {' '.join(b['flags']) or 'none'})", "",
                  *level_table(b, a)]
    lines += ["", f"## The capacity study's curves ({gpu}; no fit reads them)", "",
              *curves_table(*curves)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", default="h100", help="the results folder whose ladders to fit")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--write", action="store_true",
                    help="write the proposed table into tuner/sim/profiles.toml")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    loaded = load([args.gpu])
    if len(loaded) < 2:
        print(f"error: results/{args.gpu}/rate-ladders/ has {len(loaded)} ladder(s) with "
              "per-request files; leaving one out needs two", file=sys.stderr)
        return 2
    folds, proposed = leave_one_out(loaded, args.processes)
    base = {k: float(getattr(engine_constants(), k)) for k in PARAMS}
    before = run(loaded, base, frozenset(c for _, c, _, _ in loaded))
    after = [run([lad], folds[lad[1]], frozenset({lad[1]}))[0] for lad in loaded]
    curves = (capacity_curves(args.gpu, base), capacity_curves(args.gpu, proposed))
    command = "python bench/sim_fit.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(args.gpu, command.strip(), folds, proposed, before, after, curves,
                  repeats(loaded))
    table = profile_toml(args.gpu, proposed, [c for _, c, _, _ in loaded])
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(
        {"gpu": args.gpu, "folds": folds, "proposed": proposed, "before": before,
         "held_out": after, "curves": {"before": curves[0], "proposed": curves[1]}},
        indent=1, default=str) + "\n")
    args.out.with_name(f"{args.out.name}-{args.gpu}.toml").write_text(table)
    if args.write:
        write_profile(table, args.gpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())

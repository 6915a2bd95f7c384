"""Several runs of ``bench/search.py`` (each one sampler variant) scored against one best known
front: the grid plus every configuration any of them measured, on the SLO-feasible score the
acceptance table uses (``search_slo``). Each run's own table scores it against its own best
known front, which moves with what that variant happened to find; comparing variants needs
the same denominator (docs/decisions/0007-trust-region-and-box-cox.md).

    .venv/bin/python bench/search_compare.py base=/tmp/r7/base/search.json \\
        tr=/tmp/r7/tr/search.json [--profiles llama3-8b-h200 ...]

Prints per variant and profile: the default sampler's HV@20 (article / vllm-v1), with 5%
noise, with 4 workers at the last trial, its trials to 90% and random-60's (when run); then
each variant against the first, seed by seed: the difference of the medians of HV@20 and
its 90% interval from a paired bootstrap over the seeds both ran (a difference whose
interval holds 0 is inside the seeds' spread).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_report import summarise  # noqa: E402
from search_slo import slo_view  # noqa: E402

RULES = ("article", "vllm-v1")


def pooled(runs: list[tuple[str, dict]]) -> dict:
    """One benchmark JSON holding every labelled run, contenders renamed ``label:name``."""
    out = copy.deepcopy(runs[0][1])
    out["runs"], out["contenders"] = [], []
    for label, data in runs:
        out["contenders"] += [{**c, "name": f"{label}:{c['name']}"} for c in data["contenders"]]
        out["runs"] += [{**r, "contender": f"{label}:{r['contender']}"} for r in data["runs"]]
        for key, front in data["fronts"].items():
            out["fronts"].setdefault(key, front)
    return out


def scored(runs: list[tuple[str, dict]]) -> dict[tuple[str, str, str], dict]:
    """Every run scored against the pooled front, summarised per (profile, rules,
    ``label:contender``)."""
    return {(r["profile"], r["rules"], r["contender"]): r
            for r in summarise(slo_view(pooled(runs)))}


def table(labels: list[str], by: dict, profiles: list[str] | None = None) -> list[str]:
    """The comparison's rows (markdown) from ``scored``."""
    names = profiles or sorted({k[0] for k in by})

    def cell(label, profile, contender, key="hv20") -> str:
        got = [by.get((profile, rules, f"{label}:{contender}")) for rules in RULES]
        return " / ".join("-" if r is None else f"{r[key]:.3f}" if key.startswith("hv")
                          else f"{r[key]:g}" for r in got)

    lines = ["| variant | profile | HV@20 | 5% noise | x4 HV@last | to 90% | random-60 to 90% |",
             "|---|---|---|---|---|---|---|"]
    for label in labels:
        for profile in names:
            if not any(k[0] == profile and k[2].startswith(f"{label}:") for k in by):
                continue
            random = " / ".join(next((f"{r['to90']:g}" for (p, ru, c), r in by.items()
                                      if (p, ru) == (profile, rules) and c.endswith(":random-60")),
                                     "-") for rules in RULES)
            lines.append(f"| {label} | {profile} | {cell(label, profile, 'front')} | "
                         f"{cell(label, profile, 'front 5% noise')} | "
                         f"{cell(label, profile, 'front x4', 'hvlast')} | "
                         f"{cell(label, profile, 'front', 'to90')} | {random} |")
    return lines


def paired_interval(base: dict, variant: dict, level: float = 0.9, draws: int = 4000,
                    seed: int = 0) -> tuple[float, float, float, int]:
    """The difference of the medians (``variant`` - ``base``) over the seeds both hold
    ({seed: value}), and its ``level`` interval from resampling those seeds (pairs kept
    together): (difference, low, high, seeds)."""
    seeds = sorted(set(base) & set(variant))
    if not seeds:
        return math.nan, math.nan, math.nan, 0
    a = np.array([base[k] for k in seeds])
    b = np.array([variant[k] for k in seeds])
    idx = np.random.default_rng(seed).integers(0, len(seeds), (draws, len(seeds)))
    boot = np.median(b[idx], 1) - np.median(a[idx], 1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return float(np.median(b) - np.median(a)), float(low), float(high), len(seeds)


def differences(labels: list[str], by: dict, profiles: list[str] | None = None,
                contender: str = "front") -> list[str]:
    """Each later variant's HV@20 against the first's, paired by seed (markdown), from
    ``scored``."""
    names = profiles or sorted({k[0] for k in by})
    first = labels[0]
    lines = [f"| {contender}: HV@20, variant - {first} | profile | article | vllm-v1 |",
             "|---|---|---|---|"]
    for label in labels[1:]:
        for profile in names:
            cells = []
            for rules in RULES:
                a = by.get((profile, rules, f"{first}:{contender}"))
                b = by.get((profile, rules, f"{label}:{contender}"))
                if a is None or b is None:
                    cells.append("-")
                    continue
                d, low, high, n = paired_interval(a["hv20_by_seed"], b["hv20_by_seed"])
                cells.append(f"{d:+.3f} ({low:+.3f} to {high:+.3f}; {n} seeds)")
            if cells != ["-", "-"]:
                lines.append(f"| {label} | {profile} | {cells[0]} | {cells[1]} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="label=path of a bench/search.py JSON")
    ap.add_argument("--profiles", nargs="*", default=None)
    ap.add_argument("--contenders", nargs="*", default=["front"],
                    help="the contenders compared seed by seed (default: front)")
    args = ap.parse_args(argv)
    runs = [(a.split("=", 1)[0], json.loads(Path(a.split("=", 1)[1]).read_text()))
            for a in args.runs]
    labels, by = [label for label, _ in runs], scored(runs)
    print("\n".join(table(labels, by, args.profiles)))
    if len(runs) > 1:
        print()
        for contender in args.contenders:
            print("\n".join(differences(labels, by, args.profiles, contender)))
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

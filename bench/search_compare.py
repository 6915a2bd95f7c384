"""Several runs of ``bench/search.py`` (each one sampler variant) scored against one best known
front: the grid plus every configuration any of them measured, on the SLO-feasible score the
acceptance table uses (``search_slo``). Each run's own table scores it against its own best
known front, which moves with what that variant happened to find; comparing variants needs
the same denominator (docs/search.md, round 7).

    .venv/bin/python bench/search_compare.py base=/tmp/r7/base/search.json \\
        tr=/tmp/r7/tr/search.json [--profiles llama3-8b-h200 ...]

Prints per variant and profile: the default sampler's HV@20 (article / vllm-v1), with 5%
noise, with 4 workers at the last trial, its trials to 90% and random-60's (when run).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

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


def table(runs: list[tuple[str, dict]], profiles: list[str] | None = None) -> list[str]:
    """The comparison's rows (markdown), every run scored against the pooled front."""
    rows = summarise(slo_view(pooled(runs)))
    by = {(r["profile"], r["rules"], r["contender"]): r for r in rows}
    names = profiles or sorted({r["profile"] for r in rows})

    def cell(label, profile, contender, key="hv20") -> str:
        got = [by.get((profile, rules, f"{label}:{contender}")) for rules in RULES]
        return " / ".join("-" if r is None else f"{r[key]:.3f}" if key.startswith("hv")
                          else f"{r[key]:g}" for r in got)

    lines = ["| variant | profile | HV@20 | 5% noise | x4 HV@last | to 90% | random-60 to 90% |",
             "|---|---|---|---|---|---|---|"]
    for label, _ in runs:
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="label=path of a bench/search.py JSON")
    ap.add_argument("--profiles", nargs="*", default=None)
    args = ap.parse_args(argv)
    runs = [(a.split("=", 1)[0], json.loads(Path(a.split("=", 1)[1]).read_text()))
            for a in args.runs]
    print("\n".join(table(runs, args.profiles)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How often a search run's compiled starts would hit vLLM's compile cache.

Reads the JSON of ``bench/search.py`` (each run's ``launches``: budget, sequences and
compile key of every launched trial, in launch order) and counts, per contender, profile
and rule set over its seeds: the compiled launches (not eager), those whose (budget,
sequences) pair an earlier compiled launch of the run already had, and those whose whole
compile key (``tuner.space.compile_grid.COMPILE_KEY``) it had: the starts that load the
artefact instead of compiling, on one box with the caches kept (docs/starts.md).

    .venv/bin/python bench/search_compile.py /tmp/grid-before.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any


def hits(launches: list[list[Any]]) -> tuple[int, int, int]:
    """(compiled launches, pair repeats, key repeats) of one run."""
    pairs: set[tuple] = set()
    keys: set[tuple] = set()
    compiled = pair_hits = key_hits = 0
    for budget, seqs, key in launches:
        if key is None:
            continue
        compiled += 1
        pair_hits += (budget, seqs) in pairs
        key_hits += tuple(key) in keys
        pairs.add((budget, seqs))
        keys.add(tuple(key))
    return compiled, pair_hits, key_hits


def table(data: dict) -> list[str]:
    """One markdown row per (contender, profile, rules): sums over the seeds."""
    sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for run in data["runs"]:
        if "launches" not in run:
            continue
        row = sums[(run["contender"], run["profile"], run["rules"])]
        for i, n in enumerate((1, *hits(run["launches"]))):
            row[i] += n
    out = ["| contender | profile | rules | runs | compiled starts | pair repeats | "
           "key repeats (hit share) |", "|---|---|---|---|---|---|---|"]
    for (c, p, r), (runs, compiled, pair, key) in sorted(sums.items()):
        share = f"{key / compiled:.0%}" if compiled else "-"
        out.append(f"| {c} | {p} | {r} | {runs} | {compiled} | {pair} | {key} ({share}) |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", help="bench/search.py's JSON (its --out with .json)")
    print("\n".join(table(json.loads(open(ap.parse_args().json).read()))))


if __name__ == "__main__":
    main()

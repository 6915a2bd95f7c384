"""How often a search run's compiled starts would hit vLLM's compile cache.

Reads the JSON of ``bench/search.py`` (each run's ``launches``: budget, sequences and
compile key of every launched trial, in launch order) and counts, per contender, profile
and rule set over its seeds: the compiled launches (not eager), those whose (budget,
sequences) pair an earlier compiled launch of the run already had, and those whose whole
compile key (``tuner.space.compile_grid.COMPILE_KEY``) it had: the starts that load the
artefact instead of compiling, on one box with the caches kept (docs/starts.md). The last
column runs the seeds one after another on one box: a key any earlier run compiled hits.

    .venv/bin/python bench/search_compile.py /tmp/grid-before.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any


def hits(launches: list[list[Any]], box: set[tuple] | None = None) -> tuple[int, ...]:
    """(compiled launches, pair repeats, key repeats, key hits on ``box``) of one run;
    ``box``: the keys compiled before it on its box, to which its own are added."""
    box = set() if box is None else box
    pairs: set[tuple] = set()
    keys: set[tuple] = set()
    compiled = pair_hits = key_hits = box_hits = 0
    for budget, seqs, key in launches:
        if key is None:
            continue
        key = tuple(key)
        compiled += 1
        pair_hits += (budget, seqs) in pairs
        key_hits += key in keys
        box_hits += key in box
        pairs.add((budget, seqs))
        keys.add(key)
        box.add(key)
    return compiled, pair_hits, key_hits, box_hits


def table(data: dict) -> list[str]:
    """One markdown row per (contender, profile, rules): sums over the seeds."""
    sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    boxes: dict[tuple, set] = defaultdict(set)
    for run in sorted(data["runs"], key=lambda r: r["seed"]):
        if "launches" not in run:
            continue
        cell = (run["contender"], run["profile"], run["rules"])
        for i, n in enumerate((1, *hits(run["launches"], boxes[cell]))):
            sums[cell][i] += n
    out = ["| contender | profile | rules | runs | compiled starts | pair repeats | "
           "key repeats (hit share) | key hits, seeds in turn on one box |",
           "|---|---|---|---|---|---|---|---|"]
    for (c, p, r), (runs, compiled, pair, key, box) in sorted(sums.items()):
        out.append(f"| {c} | {p} | {r} | {runs} | {compiled} | {pair} | "
                   f"{key} ({_share(key, compiled)}) | {box} ({_share(box, compiled)}) |")
    return out


def _share(n: int, of: int) -> str:
    return f"{n / of:.0%}" if of else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", help="bench/search.py's JSON (its --out with .json)")
    print("\n".join(table(json.loads(open(ap.parse_args().json).read()))))


if __name__ == "__main__":
    main()

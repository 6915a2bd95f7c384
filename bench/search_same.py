"""Whether two runs of ``bench/search.py`` proposed the same, point for point: every run
(profile x rules x contender x seed) of the first is in the second with the same points,
outcomes, moves, SLO flags, duplicates and stop, timings aside. A refactor of a sampler
lands only when its runs reproduce the runs before it (issue 43).

    .venv/bin/python bench/search_same.py BEFORE.json AFTER.json

Prints one line per run that differs and exits 1 if any does (0 if none).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TIMINGS = ("wall_s", "ask_ms")  # how long it took differs from run to run


def runs(data: dict) -> dict[tuple, dict]:
    """Each run of a search.json by (profile, rules, contender, seed), timings left out."""
    return {(r["profile"], r["rules"], r["contender"], r["seed"]):
            {k: v for k, v in r.items() if k not in TIMINGS} for r in data["runs"]}


def differences(before: dict, after: dict) -> list[str]:
    """One line per run missing from either side or differing (with the fields that do)."""
    a, b = runs(before), runs(after)
    out = [f"{'/'.join(map(str, k))}: only in the first" for k in sorted(a.keys() - b.keys())]
    out += [f"{'/'.join(map(str, k))}: only in the second" for k in sorted(b.keys() - a.keys())]
    for k in sorted(a.keys() & b.keys()):
        fields = sorted(f for f in a[k].keys() | b[k].keys() if a[k].get(f) != b[k].get(f))
        if fields:
            out.append(f"{'/'.join(map(str, k))}: {', '.join(fields)} differ")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    before, after = (json.loads(p.read_text()) for p in (args.before, args.after))
    lines = differences(before, after)
    for line in lines:
        print(line)
    print(f"{len(runs(before))} runs; {len(lines)} differ", file=sys.stderr)
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())

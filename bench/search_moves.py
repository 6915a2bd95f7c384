"""Where the default sampler's trials go, and what each adds (a diagnostic, docs/search.md
round 4): for each profile and rule set, over seeds, each trial to the 20th grouped by its
move (``front:move``: probe, model:ehvi, model:end:N), whether it ran chunked prefill and
its token budget's band; per group the trials, the hypervolume they added to their run's
SLO-feasible front (summed over seeds, relative to the SLO-feasible front of every
configuration evaluated so far) and how many added any.

    .venv/bin/python bench/search_moves.py --profiles llama3-8b-h200 [--seeds 10]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import CONTENDERS, DEFAULT  # noqa: E402
from search_run import run_one  # noqa: E402
from search_slo import meets_slos  # noqa: E402
from search_truth import (RULE_SETS, Truth, front_volume, load_profile,  # noqa: E402
                          whole_front_reference)
from tuner.search.front import MOVE  # noqa: E402
from tuner.trials import record  # noqa: E402

BANDS = (600, 1200, 2400)  # token budget bands (upper bounds), then the rest


def group(move: dict, flags: dict) -> tuple[str, str, str]:
    kind = move.get("kind", "baseline") + (f":{move['aim']}" if move.get("aim") else "")
    budget = flags.get("max_num_batched_tokens", 0)
    band = next((f"<{b}" for b in BANDS if budget < b), f">={BANDS[-1]}")
    return kind, "chunked" if flags.get("enable_chunked_prefill") else "not chunked", band


def tally(name: str, rules: str, seeds: int, trials: int = 20) -> dict:
    profile = load_profile(name, rules)
    truth = Truth(profile)
    contender = next(c for c in CONTENDERS if c.name == DEFAULT)
    ref = whole_front_reference(truth)
    best = [(-o["output_throughput"], o["p99_itl_ms"]) for o in truth.known.values()
            if meets_slos(profile.spec, o)
            and not profile.space.rules.violations(o["flags"], profile.space.context)]
    whole = front_volume(best, ref)
    out: dict = defaultdict(lambda: [0, 0.0, 0])
    for seed in range(seeds):
        studies: list = []
        run_one(profile, truth, contender, seed, 24, studies)
        points: list = []
        told = [t for t in studies[0].trials if t.user_attrs.get("outcome") != record.DUPLICATE]
        for t in told[:trials]:
            flags = t.user_attrs.get("flags") or {}
            before = front_volume(points, ref) if points else 0.0
            o = truth.outcome(flags) if flags else None
            if o is not None and meets_slos(profile.spec, o):
                points.append((-o["output_throughput"], o["p99_itl_ms"]))
            gain = ((front_volume(points, ref) if points else 0.0) - before) / whole
            row = out[group(t.system_attrs.get(MOVE) or {}, flags)]
            row[0] += 1
            row[1] += gain
            row[2] += gain > 1e-9
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", nargs="*", default=["llama3-8b-h200"])
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args(argv)
    print("| profile | rules | move | chunked | budget | trials | added | adding |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.profiles:
        for rules in RULE_SETS:
            for key, (n, gain, adding) in sorted(tally(name, rules, args.seeds).items()):
                print(f"| {name} | {rules} | {' | '.join(key)} | {n} | {gain:.3f} | {adding} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

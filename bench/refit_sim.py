"""Refit the simulator's speed constants on the H200 configurations, some held out.

    .venv/bin/python bench/refit_sim.py                 # fit and print; nothing written
    .venv/bin/python bench/refit_sim.py --write         # and write profiles.toml
    .venv/bin/python bench/refit_sim.py --graphs-uncoalesced   # no fit: today's constants,
                                                        # no coalesced ITL share with graphs

The four speed constants of ``bench/calibrate_sim.py`` (bandwidth efficiency, step overhead,
eager launch cost, coalesced ITL share) are fitted by the same Nelder-Mead on the log errors
of throughput, p99 ITL and median ITL, over every set of ``bench/sim_error.py`` except the
configurations of ``HELD_OUT``, which were named before the fit was run and are not in it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from calibrate_sim import fit_speed, measured_points, outcome_values
from sim_error import SETS, ROOT, Row, load_trials, make_rows, render_rows, sent, tally, workload_of

# Named before the fit (2026-12-01): the low-latency corner's budget 1,024 with graphs, 64
# sequences and the only eager budget 512; two budgets of the 12-01 study; 11-29 trial 8.
# Added before the step/gap refit (2026-12-01, round 2): budget 1,222 with 157 sequences
# and budget 200 with 50 sequences, the two small-budget configurations round 2 measured
# that no earlier set has.
HELD_OUT = {("12-01 calib", 4), ("12-01 calib", 7), ("12-01 calib", 9),
            ("12-01 study", 10), ("12-01 study", 13), ("11-29/30", 8),
            ("12-01 round 2", 3), ("12-01 round 2", 4)}


def gather():
    """(label, point, baseline) of every measured configuration of every set found."""
    out = []
    for s in SETS:
        if not (ROOT / s.path).exists():
            continue
        trials = load_trials(s)
        base, n = {t["number"]: t.get("baseline") for t in trials}, sent(trials)
        out += [(s, p, base.get(p.trial), n[p.trial]) for p in measured_points(trials)]
    return out


def rows(items, consts, graphs_uncoalesced: bool = False) -> list[Row]:
    from tuner.sim import evaluate, load_gpu, load_shape

    from calibrate_sim import MODEL, flags_from_command

    shape, gpu = load_shape(MODEL), load_gpu("h200")
    defaults = flags_from_command(["vllm", "serve"])
    out = []
    for s, p, b, n in items:
        k = consts
        if graphs_uncoalesced and not p.flags.get("enforce_eager"):
            k = dataclasses.replace(consts, itl_coalesced_fraction=0.0)
        v = outcome_values(evaluate(p.flags, shape, gpu, workload_of(s.study, n), k))
        out += make_rows(s.label, [p], defaults, {p.trial: b}, [v])
    return out


def main(argv: list[str] | None = None) -> int:
    from calibrate_sim import write_profiles
    from tuner.sim.profiles import engine_constants

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the fitted constants")
    ap.add_argument("--max-evals", type=int, default=120)
    ap.add_argument("--graphs-uncoalesced", action="store_true",
                    help="no fit: every configuration, no coalesced ITL share with CUDA graphs")
    args = ap.parse_args(argv)
    started = time.monotonic()
    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    items = gather()
    if args.graphs_uncoalesced:
        out = rows(items, engine_constants(), graphs_uncoalesced=True)
        print("\n".join(render_rows(out)) + "\n\n" + "\n".join(tally(out)))
        return 0
    fit = [i for i in items if (i[0].label, i[1].trial) not in HELD_OUT]
    held = [i for i in items if (i[0].label, i[1].trial) in HELD_OUT]
    say(f"{len(fit)} configurations fitted, {len(held)} held out")
    current = engine_constants()
    speed = fit_speed([i[1] for i in fit], current, say, args.max_evals)
    say(f"fitted: {speed}")
    refit = dataclasses.replace(current, **speed)
    for name, part in (("fitted", fit), ("held out", held)):
        before, after = rows(part, current), rows(part, refit)
        print(f"\n### {name}: now / refit\n")
        print("\n".join(render_rows(before)) + "\n\n" + "\n".join(tally(before)))
        print("\n" + "\n".join(render_rows(after)) + "\n\n" + "\n".join(tally(after)))
    say(f"{time.monotonic() - started:.0f} s")
    if args.write:
        write_profiles(speed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Refit the simulator's step and gap constants on the H200 configurations, some held out.

    .venv/bin/python bench/refit_sim.py                 # fit and print; nothing written
    .venv/bin/python bench/refit_sim.py --write         # and write profiles.toml

``KEYS``: the speed constants of ``bench/calibrate_sim.py`` (bandwidth efficiency, step
overhead, eager dispatch cost), the piecewise-graph launch cost of steps with prefill tokens,
and the three shares of the gap model (``tuner/sim/gaps.py``), fitted by the same
Nelder-Mead on the log errors of throughput, p99 ITL and median ITL, over every set of
``bench/sim_error.py`` (each configuration run for as many requests as its trial completed)
except the configurations of ``HELD_OUT``, which were named before the fit was run. It
starts from the constants in profiles.toml and prints, for the fitted and the held-out
configurations apart, the table with those constants and with the fitted ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from calibrate_sim import SHARES, SPEED_KEYS, fit_speed, measured_points, outcome_values
from sim_error import SETS, ROOT, Row, load_trials, make_rows, render_rows, sent, tally, workload_of

KEYS = (*SPEED_KEYS, "piecewise_launch_us_per_layer", *SHARES)
SOURCE = ("measured on H200, results/h200/ (2026-11-29 .. 2026-12-01 round 2), "
          "bench/refit_sim.py")
NOTE = "fitted to throughput, p99 and median ITL of every H200 configuration but 8 held out"

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


def values(items, consts) -> list[dict[str, float]]:
    from tuner.sim import evaluate, load_gpu, load_shape

    from calibrate_sim import MODEL

    shape, gpu = load_shape(MODEL), load_gpu("h200")
    return [outcome_values(evaluate(p.flags, shape, gpu, workload_of(s.study, n), consts))
            for s, p, _, n in items]


def rows(items, consts) -> list[Row]:
    from calibrate_sim import flags_from_command

    defaults = flags_from_command(["vllm", "serve"])
    return [make_rows(s.label, [p], defaults, {p.trial: b}, [v])[0]
            for (s, p, b, _), v in zip(items, values(items, consts))]


def main(argv: list[str] | None = None) -> int:
    from calibrate_sim import write_profiles
    from tuner.sim.profiles import engine_constants

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the fitted constants")
    ap.add_argument("--max-evals", type=int, default=300)
    args = ap.parse_args(argv)
    started = time.monotonic()
    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    items = gather()
    fit = [i for i in items if (i[0].label, i[1].trial) not in HELD_OUT]
    held = [i for i in items if (i[0].label, i[1].trial) in HELD_OUT]
    say(f"{len(fit)} configurations fitted, {len(held)} held out")
    current = engine_constants()
    by_point = {id(i[1]): i for i in fit}
    speed = fit_speed([i[1] for i in fit], current, say, args.max_evals, KEYS,
                      lambda points, k: values([by_point[id(p)] for p in points], k))
    say(f"fitted: {speed}")
    refit = dataclasses.replace(current, **speed)
    for name, part in (("fitted", fit), ("held out", held)):
        before, after = rows(part, current), rows(part, refit)
        print(f"\n### {name}: now / refit\n")
        print("\n".join(render_rows(before)) + "\n\n" + "\n".join(tally(before)))
        print("\n" + "\n".join(render_rows(after)) + "\n\n" + "\n".join(tally(after)))
    say(f"{time.monotonic() - started:.0f} s")
    if args.write:
        write_profiles(speed, source=SOURCE, notes={k: NOTE for k in KEYS})
    return 0


if __name__ == "__main__":
    sys.exit(main())

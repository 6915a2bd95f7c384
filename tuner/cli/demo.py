"""`tuner demo FILE`: create the study (fresh), run a short study on one worker, and end
with the Pareto front and the best flags. `make demo` runs it on studies/demo-sim.toml."""

from __future__ import annotations

import argparse
import logging

import optuna

from tuner.cli.study import add_storage_flag
from tuner.cli.worker import run_worker
from tuner.engine.trust import EngineTrust
from tuner.storage import create_study, load_study_file, mask, resolve_url
from tuner.storage.database import open_storage

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="run a short study end to end and show the result")
    p.add_argument("file", help="a study file, e.g. studies/demo-sim.toml")
    add_storage_flag(p)
    p.add_argument("--keep", action="store_true",
                   help="continue an existing study of that name instead of starting afresh")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    spec = load_study_file(args.file)
    url = resolve_url(args.storage)
    if not args.keep:
        try:
            optuna.delete_study(study_name=spec.name, storage=open_storage(url))
        except KeyError:
            pass
    create_study(spec, url)
    log.info("demo: study %s in %s, %d trials on engine %s", spec.name, mask(url),
             spec.search.n_trials, spec.engine.kind)
    code = run_worker(spec.name, url, tuple(spec.hardware.gpus), None, None,
                      # The study comes from the local file just read, not from someone
                      # else's database.
                      EngineTrust(allowed=(), trust_stored=True))
    if code:
        return code
    return _show(spec.name, url)


def _show(name: str, url: str) -> int:
    """The Pareto front and the best flags, through `tuner pareto` and `tuner best`."""
    from tuner.cli import main

    print("\nPareto front (tuner pareto):")
    main(["pareto", name, "--storage", url])
    print(_front_plot(name, url), end="")
    print("\nBest flags (tuner best --format cli):")
    main(["best", name, "--storage", url, "--format", "cli"])
    print(f"\nThe whole front, the hypervolume and the flags' effects as HTML: "
          f"tuner report {name} --storage {mask(url)} -o {name}.html")
    return 0


# How the demo's plot names an objective's axis.
AXES = {"output_throughput": "tok/s", "p99_itl_ms": "p99 ITL ms",
        "capacity_rps": "req/s within SLOs", "reference_p99_itl_ms": "p99 ITL ms at {rate:g} req/s"}


def _front_plot(name: str, url: str) -> str:
    """The front's trade-off in the terminal: the minimised objective across, the
    maximised one up (a two-objective study of one of each; else nothing)."""
    from tuner.trials.pareto import pareto_front
    from tuner.trials.queries import load_records
    from tuner.results.textplot import front_plot
    from tuner.storage import open_study

    opened = open_study(name, url)
    objectives = opened.spec.objectives
    ups = [o.metric for o in objectives if o.direction == "maximize"]
    downs = [o.metric for o in objectives if o.direction == "minimize"]
    if len(ups) != 1 or len(downs) != 1:
        return ""
    front = pareto_front(load_records(opened.study), objectives)
    pts = [(r.metric(downs[0]), r.metric(ups[0])) for r in front]
    pts = [p for p in pts if None not in p]
    if not pts:
        return ""
    rate = opened.spec.capacity.reference_rate or 0
    x_label = AXES.get(downs[0], downs[0]).format(rate=rate)
    y_label = AXES.get(ups[0], ups[0]).format(rate=rate)
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    small = max(ys) < 100  # requests/s: decimals matter
    return (f"\nThe front: {len(pts)} points, {x_label} {min(xs):,.1f}-{max(xs):,.1f} "
            f"({max(xs) / min(xs):.1f}x)\n"
            + front_plot(pts, x_label=x_label, y_label=y_label,
                         y_format=",.2f" if small else ",.0f"))

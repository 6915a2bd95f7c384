"""`tuner demo FILE`: create the study (fresh), say what it measures, run it on one worker,
and end with the Pareto front, the answer (the best flags, their gain over vLLM's defaults)
and the next command. `make demo` runs it on studies/capacity-sim.toml (``MAKE_DEMO``): a
capacity study on the simulated engine, which runs slower than its study file asks on a
busy machine (``paced_time_scale``), so that the client keeps up instead of failing trials.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import optuna

from tuner.cli.study import add_storage_flag, check_simulated_model
from tuner.cli.worker import run_worker
from tuner.engine.trust import EngineTrust
from tuner.results.summary import Summary
from tuner.spec import StudySpec
from tuner.errors import StudyNotFoundError
from tuner.storage import create_study, load_study_file, mask, open_study, resolve_url
from tuner.storage.database import open_storage
from tuner.trials import default_baseline
from tuner.trials.record import DEFAULT_BASELINE

log = logging.getLogger(__name__)

# The study `make demo` runs (the Makefile names it; tests/unit/test_demo.py checks they agree).
MAKE_DEMO = "studies/capacity-sim.toml"
# The cores a simulated trial keeps busy: the load generator's and the server's.
TRIAL_CORES = 2.0
SLOWEST = 0.5  # the most a busy machine slows the simulator, against the study file


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="run a short study end to end and show the result")
    p.add_argument("file", help="a study file, e.g. studies/demo-sim.toml")
    add_storage_flag(p)
    p.add_argument("--keep", action="store_true",
                   help="continue an existing study of that name instead of starting afresh")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    spec = load_study_file(args.file)
    check_simulated_model(spec, args.file)
    url = resolve_url(args.storage)
    if not args.keep:
        try:
            optuna.delete_study(study_name=spec.name, storage=open_storage(url))
        except KeyError:
            pass
    spec = _paced(spec, url if args.keep else None)
    create_study(spec, url)
    log.info("demo: study %s in %s, %d trials on engine %s", spec.name, mask(url),
             spec.search.n_trials, spec.engine.kind)
    print(what_it_measures(spec), flush=True)
    code = run_worker(spec.name, url, tuple(spec.hardware.gpus), None, None,
                      # The study comes from the local file just read, not from someone
                      # else's database.
                      EngineTrust(allowed=(), trust_stored=True))
    if code:
        return code
    return _show(spec.name, url, mask(url) if args.storage is not None else None)


def _show(name: str, url: str, storage: str | None) -> int:
    """The Pareto front (`tuner pareto`), then the answer and the next commands."""
    from tuner.cli import main
    from tuner.cli.results import load_summary

    print("\nPareto front (tuner pareto):")
    main(["pareto", name, "--storage", url])
    print(_front_plot(name, url), end="")
    summary = load_summary(name, url)
    print(the_answer(summary) + next_commands(summary.spec, storage), end="")
    return 0


def paced_time_scale(configured: float, cores: int, load: float) -> float:
    """The simulator's time scale for a demo trial on a machine with ``cores`` usable
    cores and a one-minute load average of ``load`` (other work's runnable tasks): the
    study file's ``configured`` scale where a trial's ``TRIAL_CORES`` are free, else
    slower in proportion to the cores left, down to ``SLOWEST`` of it. A slower clock asks
    the client for fewer tokens a second, so a busy machine lengthens the demo instead of
    starving its client (a trial that measured the client is no measurement)."""
    free = max(0.0, cores - load)
    if free >= TRIAL_CORES:
        return configured
    return float(f"{configured * max(SLOWEST, free / TRIAL_CORES):.2g}")


def busy_cores(before: str, after: str, cpus: set[int]) -> float:
    """How many of ``cpus`` other work kept busy between two readings of /proc/stat (its
    ``cpuN`` lines: user, nice, system, idle, iowait, irq, softirq, steal): the share of
    their time not idle, times their number. 0 where no listed CPU's time advanced."""
    def times(text: str) -> dict[int, tuple[int, int]]:
        out = {}
        for line in text.splitlines():
            name, *fields = line.split()
            if name[3:].isdigit() and name.startswith("cpu") and int(name[3:]) in cpus:
                ticks = [int(f) for f in fields[:8]]
                out[int(name[3:])] = (sum(ticks), ticks[3] + ticks[4])
        return out
    start, end = times(before), times(after)
    total = sum(end[c][0] - start[c][0] for c in end if c in start)
    idle = sum(end[c][1] - start[c][1] for c in end if c in start)
    return len(end) * (total - idle) / total if total > 0 else 0.0


def _busy_now(cpus: set[int], sample_s: float = 1.0) -> float:
    """``busy_cores`` over the next ``sample_s`` seconds; 0 where /proc/stat is unreadable.
    The one-minute load average trails a job that started just now (a busy loop beside
    the demo) by most of a minute; this reading does not."""
    try:
        with open("/proc/stat") as f:
            before = f.read()
        time.sleep(sample_s)
        with open("/proc/stat") as f:
            return busy_cores(before, f.read(), cpus)
    except OSError:
        return 0.0


def _paced(spec: StudySpec, kept: str | None) -> StudySpec:
    """``spec`` with the simulator's time scale for this machine, now
    (``paced_time_scale`` of the larger of the one-minute load average and the cores busy
    this second); a study kept in storage ``kept`` (--keep) keeps its own."""
    if spec.engine.kind != "sim":
        return spec
    scale = None
    if kept is not None:
        try:
            scale = open_study(spec.name, kept).spec.engine.time_scale
        except StudyNotFoundError:
            pass
    if scale is None:
        cpus = os.sched_getaffinity(0)
        load = max(os.getloadavg()[0], _busy_now(cpus))
        cores = len(cpus)
        scale = paced_time_scale(spec.engine.time_scale, cores, load)
        if scale != spec.engine.time_scale:
            log.warning("demo: this machine is busy (load %.1f on %d cores): the simulator "
                        "runs at %gx real time, not the study file's %gx, so that the "
                        "client's delays weigh less", load, cores, scale,
                        spec.engine.time_scale)
    return paced_spec(spec, scale)


def paced_spec(spec: StudySpec, scale: float) -> StudySpec:
    """``spec`` on a simulator at time scale ``scale``, with the client's lag allowed in
    wall time (``workload.max_client_lag_ms``) widened as much as the clock slows: a lag of
    L wall ms errs by L times the scale in simulated time, so the file's bound holds there.
    A busy machine delays every wake-up of the client, whatever its load."""
    configured = spec.engine.time_scale
    if scale == configured:
        return spec
    engine = spec.engine.model_copy(update={"time_scale": scale})
    lag = spec.workload.max_client_lag_ms * configured / scale
    workload = spec.workload.model_copy(update={"max_client_lag_ms": lag})
    return spec.model_copy(update={"engine": engine, "workload": workload})


def _limits(spec: StudySpec) -> str:
    return ", ".join(f"{k} <= {v:g} ms" for k, v in spec.slo.limits().items()) or "none"


def what_it_measures(spec: StudySpec) -> str:
    """Before the first trial: the SLOs, what each trial runs (the ladder, on a capacity
    study), the objectives and the engine."""
    lines = [f"\nStudy {spec.name}: {spec.description}", f"  SLOs: {_limits(spec)}"]
    if spec.measures_capacity:
        c = spec.capacity
        start = (f" from {c.reference_rate:g} req/s (the traffic you expect)"
                 if c.reference_rate else "")
        lines.append(f"  each trial: a saturated benchmark, then a load ladder of Poisson "
                     f"rates{start}, at most {c.max_levels} levels of {c.level_s:g} s, to "
                     "the highest rate within the SLOs: its capacity")
    else:
        lines.append("  each trial: a saturated benchmark")
    goals = ", ".join(f"{o.direction} {o.metric}" for o in spec.objectives)
    lines.append(f"  objectives: {goals}; {spec.search.n_trials} trials, vLLM's defaults "
                 "first")
    if spec.engine.kind == "sim":
        lines.append(f"  engine: simulated (tuner sim serve) at {spec.engine.time_scale:g}x "
                     "real time: a model of vLLM, not a measurement")
    return "\n".join(lines) + "\n"


def the_answer(summary: Summary) -> str:
    """The flags `tuner best` picks (the most traffic within the SLOs, with the capacity's
    interval, on a capacity study), their gain over vLLM's defaults, and the command."""
    from tuner.results.answer import answer

    said = answer(summary)
    if not said.ok:
        return f"\nNo answer: {said.error}\n"
    gain = json.loads(answer(summary, "json").text).get("gain_over_default_pct") or {}
    return (f"\nThe answer (tuner best {summary.name}):\n  {said.about}\n"
            f"  {_gain_line(summary, gain)}\n  its flags:\n{said.text}")


def _gain_line(summary: Summary, gain: dict[str, float | None]) -> str:
    default = default_baseline(summary.records)
    if default is None:
        tried = [r for r in summary.records if r.baseline == DEFAULT_BASELINE]
        why = (f"its trial {tried[-1].number} failed: {tried[-1].failure.kind}"
               if tried and tried[-1].failure is not None else "not run yet")
        return f"gain over vLLM's defaults: unknown, the defaults are not measured ({why})"
    parts = []
    for o in summary.spec.objectives:
        value, pct = default.metric(o.metric), gain.get(o.metric)
        shown = "-" if pct is None else f"{pct:+.1f}%"
        parts.append(f"{o.metric} {shown} (defaults: {value:,.3g})" if value is not None
                     else f"{o.metric} {shown}")
    return f"gain over vLLM's defaults (trial {default.number}): " + ", ".join(parts)


def next_commands(spec: StudySpec, storage: str | None) -> str:
    """What to run next: a tighter limit, the HTML report, your own model."""
    at = f" --storage {storage}" if storage else ""
    lines = ["\nNext:"]
    itl = spec.slo.p99_itl_ms
    if itl is not None:
        lines.append(f"  tuner best {spec.name}{at} --max-itl-p99 {itl / 2:g}    "
                     "# the same answer under a tighter p99 ITL")
    if spec.measures_capacity and spec.capacity.reference_rate is not None:
        lines.append(f"  tuner best {spec.name}{at} --rate {spec.capacity.reference_rate:g}"
                     "    # the lowest p99 ITL at the traffic you expect")
    lines.append(f"  tuner report {spec.name}{at} -o {spec.name}.html    # the front, each "
                 "trial's curve, the flags' effects")
    lines.append("  your own model: start from studies/template.toml (README, "
                 "\"Tune your model\")")
    return "\n".join(lines) + "\n"


# How the demo's plot names an objective's axis.
AXES = {"output_throughput": "tok/s", "p99_itl_ms": "p99 ITL ms",
        "capacity_rps": "req/s within SLOs", "reference_p99_itl_ms": "p99 ITL ms at {rate:g} req/s"}


def _front_plot(name: str, url: str) -> str:
    """The front's trade-off in the terminal: the minimised objective across, the
    maximised one up (a two-objective study of one of each; else nothing)."""
    from tuner.trials.pareto import pareto_front
    from tuner.trials.queries import load_records
    from tuner.results.textplot import front_plot

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

"""The simulator's error, as it stands (no refit), on every configuration measured on the H200.

    .venv/bin/python bench/sim_error.py            # print the table
    .venv/bin/python bench/sim_error.py --write    # and put it into results/h200/simulator-error.md

Each measured set (``SETS``: the first study of 2026-11-29/30, the two-GPU run, the study of
2026-12-01, the calibration set of 2026-12-01 and round 2's study) is read as recorded, one
row per distinct measured configuration, and run through ``tuner.sim.evaluate`` with the
constants now in ``tuner/sim/profiles.toml``, the flags of the `vllm serve` command the trial
ran and its study's workload, for as many requests as the trial's run completed. Errors are model / measured - 1, judged against the goal of issue 21:
output throughput within 10 %, p99 ITL within 15 %. Median TTFT is shown, not judged.

``--write`` puts the table between two markers in the report (the prose around it is
written by hand), so the calibration report beside it (``bench/calibrate_sim.py --report``)
is kept, and that script keeps the marked section when it rewrites the report.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from typing import Any

from calibrate_sim import (ERROR_END, ERROR_SECTION, ROOT, Point, measured_points,
                           outcome_values, rel_error)

GOALS = {"output_throughput": 0.10, "p99_itl_ms": 0.15}
SHOWN = ("output_throughput", "p99_itl_ms", "median_ttft_ms")
BEGIN = "<!-- sim-error: begin (bench/sim_error.py --write) -->"
END = ERROR_END
SHORT = {"max_num_batched_tokens": "budget", "max_model_len": "len",
         "gpu_memory_utilization": "mem", "enable_prefix_caching": "prefix",
         "enable_chunked_prefill": "chunked", "enforce_eager": "eager",
         "max_num_seqs": "seqs", "block_size": "block", "kv_cache_dtype": "kv"}


@dataclass(frozen=True)
class MeasuredSet:
    """One recorded study: a trials.json (``scripts/gpu/summarize.py``) or a study.db."""

    label: str
    path: str  # relative to the repository root
    study: str  # the study file whose workload the trials ran
    study_name: str | None = None  # for a study.db


SETS = (
    MeasuredSet("11-29/30", "results/h200/trials.json", "studies/llama3-8b-h200.toml"),
    MeasuredSet("11-30 2 GPUs", "results/h200/two-gpus/trials.json",
                "studies/llama3-8b-h200-2gpu.toml"),
    MeasuredSet("12-01 study", "../shared/h200-2026-12-01/study.db",
                "studies/llama3-8b-h200.toml", "llama3-8b-h200-p4"),
    MeasuredSet("12-01 calib", "results/h200/calibration/trials.json",
                "studies/llama3-8b-h200-calib.toml"),
    MeasuredSet("12-01 round 2", "results/h200/round2/study.db",
                "studies/llama3-8b-h200.toml", "llama3-8b-h200"),
)


@dataclass(frozen=True)
class Row:
    """One configuration: what was measured, what the model gives, the relative errors."""

    label: str
    trial: int
    config: str
    measured: dict[str, float]
    model: dict[str, float]

    def error(self, metric: str) -> float:
        return rel_error(self.model[metric], self.measured[metric])

    def misses(self) -> list[str]:
        """The metrics whose error is beyond the goal (or that the model refused to start)."""
        return [k for k, goal in GOALS.items() if not abs(self.error(k)) <= goal]


# ---- pure ---------------------------------------------------------------------------------

def short_config(flags: dict[str, Any], defaults: dict[str, Any], baseline: str | None) -> str:
    """The flags that differ from vLLM's defaults, short (``vLLM defaults`` when none do)."""
    shown = [f"{SHORT[k]}={_short_value(v)}" for k, v in flags.items()
             if k in SHORT and v is not None and v != defaults.get(k)]
    text = " ".join(shown) or "vLLM defaults"
    return f"{baseline}: {text}" if baseline and baseline != "default" else text


def _short_value(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return f"{v:g}" if isinstance(v, float) else str(v)


def make_rows(label: str, points: list[Point], defaults: dict[str, Any],
              baselines: dict[int, str | None], values: list[dict[str, float]]) -> list[Row]:
    return [Row(label, p.trial, short_config(p.flags, defaults, baselines.get(p.trial)),
                {k: p.measured[k] for k in SHOWN}, {k: v[k] for k in SHOWN})
            for p, v in zip(points, values)]


def _cell(row: Row, metric: str) -> str:
    m, v, e = row.measured[metric], row.model[metric], row.error(metric)
    fmt = "{:,.0f}" if metric in ("output_throughput", "median_ttft_ms") else "{:,.1f}"
    if not math.isfinite(v):
        return f"{fmt.format(m)} / refused"
    err = f"{e:+.1%}"
    if metric in GOALS and not abs(e) <= GOALS[metric]:
        err = f"**{err}**"
    return f"{fmt.format(m)} / {fmt.format(v)} ({err})"


def render_rows(rows: list[Row]) -> list[str]:
    out = ["| set | trial | configuration | output tok/s, measured / model | "
           "p99 ITL ms, measured / model | median TTFT ms, measured / model |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.label} | {r.trial} | {r.config} | " +
                   " | ".join(_cell(r, k) for k in SHOWN) + " |")
    return out


def tally(rows: list[Row]) -> list[str]:
    """One line per goal: how many rows meet it, and the worst error."""
    out = []
    for k, goal in GOALS.items():
        errs = [r.error(k) for r in rows]
        met = sum(1 for e in errs if abs(e) <= goal)
        worst = max(errs, key=lambda e: abs(e) if math.isfinite(e) else math.inf)
        out.append(f"- {k} within {goal:.0%}: {met} of {len(rows)} "
                   f"(worst {worst:+.1%}, median |error| {_median_abs(errs):.1%})")
    both = sum(1 for r in rows if not r.misses())
    out.append(f"- both goals: {both} of {len(rows)} configurations")
    return out


def _median_abs(errs: list[float]) -> float:
    a = sorted(abs(e) for e in errs if math.isfinite(e))
    n = len(a)
    return (a[n // 2] if n % 2 else (a[n // 2 - 1] + a[n // 2]) / 2) if n else math.nan


def splice(report: str, table: str) -> str:
    """The report with the table between the markers replaced; without markers, a new
    section (``ERROR_SECTION``, then the marked table) after the title."""
    block = f"{BEGIN}\n{table.rstrip()}\n{END}"
    if BEGIN in report and END in report:
        head, rest = report.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    title, sep, body = report.partition("\n\n")
    return f"{title}\n\n{ERROR_SECTION}\n\n{block}\n\n{body}"


# ---- I/O ------------------------------------------------------------------------------------

def load_trials(s: MeasuredSet) -> list[dict[str, Any]]:
    path = (ROOT / s.path).resolve()
    if path.suffix == ".json":
        return json.loads(path.read_text())
    import optuna

    from tuner.trials import from_frozen

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=s.study_name, storage=f"sqlite:///{path}")
    return [{"number": t.number, **from_frozen(t).to_user_attrs()} for t in study.trials]


def workload_of(study: str, num_requests: int | None = None):
    """The study's workload, run for ``num_requests`` (default: the study's own count)."""
    import tomllib

    from tuner.sim import SimWorkload

    w = tomllib.loads((ROOT / study).read_text())["workload"]
    return SimWorkload(max_concurrency=int(w["max_concurrency"]),
                       num_requests=int(num_requests or w["num_requests"]),
                       input_len=int(w["input_len"]), output_len=int(w["output_len"]))


def sent(trials: list[dict[str, Any]]) -> dict[int, int | None]:
    """Requests each trial's (first) run completed, by trial number: the simulated run is as
    long, since a whole-run p99 ITL includes the first burst of ``max_concurrency`` requests
    and an early-stopped run (up to 1,800 here) dilutes it less than 1,000 do."""
    return {t["number"]: int((t.get("metrics") or {}).get("completed") or 0) or None
            for t in trials}


def rows_of(s: MeasuredSet, consts) -> list[Row]:
    from tuner.sim import evaluate, load_gpu, load_shape

    from calibrate_sim import MODEL, flags_from_command

    trials = load_trials(s)
    points, n = measured_points(trials), sent(trials)
    shape, gpu = load_shape(MODEL), load_gpu("h200")
    values = [outcome_values(evaluate(p.flags, shape, gpu, workload_of(s.study, n[p.trial]),
                                      consts)) for p in points]
    defaults = flags_from_command(["vllm", "serve"])
    return make_rows(s.label, points, defaults,
                     {t["number"]: t.get("baseline") for t in trials}, values)


def main(argv: list[str] | None = None) -> int:
    from tuner.sim.profiles import engine_constants

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help="put the table into results/h200/simulator-error.md")
    args = ap.parse_args(argv)
    started = time.monotonic()
    consts = engine_constants()
    rows: list[Row] = []
    for s in SETS:
        if not (ROOT / s.path).exists():
            print(f"{s.label}: {s.path} not found, left out", file=sys.stderr)
            continue
        rows += rows_of(s, consts)
    table = render_rows(rows) + [""] + tally(rows)
    print("\n".join(table), flush=True)
    print(f"{len(rows)} configurations, {time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.write:
        report = ROOT / "results/h200/simulator-error.md"
        report.write_text(splice(report.read_text(), "\n".join(table)))
        print(f"wrote {report.relative_to(ROOT)}", file=sys.stderr)
    return 0 if all(not r.misses() for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

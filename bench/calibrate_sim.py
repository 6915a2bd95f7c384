"""Calibrate the simulator (tuner.sim) against the real H200 trials in results/h200/.

    .venv/bin/python bench/calibrate_sim.py            # fit, write profiles.toml and the report
    .venv/bin/python bench/calibrate_sim.py --check    # evaluate only (no fit, nothing written)
    .venv/bin/python bench/calibrate_sim.py --report   # the report with today's constants (no fit)

Each measured configuration of ``results/h200/trials.json`` (duplicates left out) is run
through ``tuner.sim.evaluate`` with the flags of the `vllm serve` command the trial really
ran and the study's workload (closed loop, random 1024/128, 1,000 requests, concurrency 256).
Then four engine constants are fitted, on the trials of ``FIT_TRIALS`` only (the others are
held out and show how the model predicts configurations it was not fitted on), by Nelder-Mead on the log errors of output throughput,
p99 ITL and median ITL: the achievable memory bandwidth, the per-step overhead, the eager
launch cost per layer, and the share of token pairs the client receives in one message. The
memory constants are not fitted (the report says why); the structural change this needed
(``unchunked_mixes_decodes``) is set in profiles.toml by hand.

The fitted values are written into ``tuner/sim/profiles.toml`` with their source, and the
report, before and after, into ``results/h200/simulator-error.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
TRIALS = ROOT / "results/h200/trials.json"
STUDY = ROOT / "studies/llama3-8b-h200.toml"
MODEL = ROOT / "studies/models/llama3-8b"
PROFILES = ROOT / "tuner/sim/profiles.toml"
REPORT = ROOT / "results/h200/simulator-error.md"
DATE = "2026-11-29"
# The trials the speed constants were fitted on (2026-11-29); later trials are held out.
FIT_TRIALS = (0, 1, 2, 3)
SOURCE = f"measured on H200, results/h200/ ({DATE}), bench/calibrate_sim.py"

# The goals of issue 10 (relative error, calibrated model vs measurement).
GOALS = {"kv_cache_tokens": 0.02, "output_throughput": 0.20, "p99_itl_ms": 0.20}
# Where the goal cannot be met without breaking the start-check tests (see the report's
# limits): the bound the calibrated model is held to instead.
KNOWN_GAPS: dict[tuple[int, str], float] = {}  # none since the 0.92 default (memory-probe.md)
METRICS = ("kv_cache_tokens", "output_throughput", "p99_itl_ms", "median_itl_ms",
           "median_ttft_ms", "p99_ttft_ms")
# The section bench/sim_error.py adds to the report (heading, prose by hand, then its table
# between markers): kept, after the title, when this script rewrites the report.
ERROR_SECTION = "## The simulator as it stands, on every H200 configuration"
ERROR_END = "<!-- sim-error: end -->"
# The 11-29 fit's fourth constant, the share of token pairs read as one message
# (``itl_coalesced_fraction``), is gone: the gap model (tuner/sim/gaps.py, fitted by
# bench/refit_sim.py on 2026-12-01) took its place.
SPEED_KEYS = ("bandwidth_efficiency", "step_overhead_ms", "eager_launch_us_per_layer")
DIGITS = {"bandwidth_efficiency": 3, "step_overhead_ms": 2, "eager_launch_us_per_layer": 1,
          "piecewise_launch_us_per_layer": 1, "late_gap_share": 4,
          "late_gap_share_launch_bound": 4, "doubled_gap_share_multi_prefill": 4}
SHARES = ("late_gap_share", "late_gap_share_launch_bound", "doubled_gap_share_multi_prefill")


@dataclass(frozen=True)
class Point:
    """One measured configuration: the flags vLLM ran with and what was measured."""

    trial: int
    flags: dict[str, Any]
    measured: dict[str, float]
    vllm_bench: dict[str, float]  # `vllm bench serve` on the same server, when it ran


# ---- pure: the measured points and the errors --------------------------------------------

def flags_from_command(command: list[str]) -> dict[str, Any]:
    """The engine flags of a recorded `python -m vllm...api_server` command line (the flags
    not on it take vLLM's defaults in the simulator, as they did in vLLM)."""
    from tuner.sim.serveargs import add_serve_flags, engine_flags

    argv = command[command.index("-m") + 2:] if "-m" in command else command[1:]
    p = argparse.ArgumentParser(add_help=False)
    add_serve_flags(p)
    args, _ = p.parse_known_args(argv)
    flags = engine_flags(args)
    return {k: v for k, v in flags.items() if k not in ("dtype", "seed")}


def measured_points(trials: list[dict[str, Any]]) -> list[Point]:
    """The measured trials, one per distinct configuration (duplicates are told, not run)."""
    points = []
    for t in trials:
        if t.get("outcome") != "measured" or t.get("duplicate_of") is not None:
            continue
        m = t["metrics"]
        measured = {"kv_cache_tokens": float(t["kv_cache_tokens"]),
                    **{k: float(m[k]) for k in METRICS if k != "kv_cache_tokens"}}
        bench = {k: float(v) for k, v in (t.get("vllm_bench") or {}).items()
                 if k in METRICS and v is not None}
        points.append(Point(t["number"], flags_from_command(t["command"]), measured, bench))
    return points


def rel_error(model: float, measured: float) -> float:
    return model / measured - 1.0 if measured else math.nan


def outcome_values(outcome) -> dict[str, float]:
    return {k: float(getattr(outcome, k)) if outcome.started else math.nan for k in METRICS}


def errors(points: list[Point], values: list[dict[str, float]]) -> list[dict[str, float]]:
    return [{k: rel_error(v[k], p.measured[k]) for k in METRICS} for p, v in zip(points, values)]


def unexplained(points: list[Point], values: list[dict[str, float]]) -> list[str]:
    """The misses beyond the documented gaps (KNOWN_GAPS), one line each."""
    out = []
    for p, e in zip(points, errors(points, values)):
        for k, goal in GOALS.items():
            bound = KNOWN_GAPS.get((p.trial, k), goal)
            if not abs(e[k]) <= bound:
                out.append(f"trial {p.trial}: {k} off by {e[k]:+.1%} (bound {bound:.1%})")
    return out


def within_goals(points: list[Point], values: list[dict[str, float]]) -> list[str]:
    """The goals missed, one line each (empty when every point meets every goal)."""
    missed = []
    for p, e in zip(points, errors(points, values)):
        for k, goal in GOALS.items():
            if not abs(e[k]) <= goal:
                missed.append(f"trial {p.trial}: {k} off by {e[k]:+.1%} (goal {goal:.0%})")
    return missed


# ---- the simulator ----------------------------------------------------------------------

def study_workload():
    from tuner.sim import SimWorkload

    w = tomllib.loads(STUDY.read_text())["workload"]
    return SimWorkload(max_concurrency=int(w["max_concurrency"]),
                       num_requests=int(w["num_requests"]), input_len=int(w["input_len"]),
                       output_len=int(w["output_len"]))


def simulate(points: list[Point], consts=None) -> list[dict[str, float]]:
    """The model's values at every point (NaN where the simulated start is refused)."""
    from tuner.sim import evaluate, load_gpu, load_shape

    shape, gpu, workload = load_shape(MODEL), load_gpu("h200"), study_workload()
    return [outcome_values(evaluate(p.flags, shape, gpu, workload, consts)) for p in points]


# ---- fitting ------------------------------------------------------------------------------

def non_kv_rows(points: list[Point], consts) -> list[str]:
    """Memory outside the KV cache, GiB: what each measurement implies (requested - KV tokens
    x bytes per token) beside the model's, as table rows. Not fitted: the report's limits
    say why."""
    from tuner.sim import load_gpu, load_shape
    from tuner.sim.config import resolve
    from tuner.sim.memory import plan_memory
    from tuner.sim.profiles import GIB

    shape, gpu = load_shape(MODEL), load_gpu("h200")
    rows = ["| trial | eager | budget | utilisation | implied by the log | model | of which weights |",
            "|---|---|---|---|---|---|---|"]
    for p in points:
        cfg = resolve(p.flags, shape, gpu)
        plan = plan_memory(cfg, shape, gpu, consts)
        kv = p.measured["kv_cache_tokens"] * plan.kv_bytes_per_token
        rows.append(f"| {p.trial} | {'yes' if cfg.enforce_eager else 'no'} | "
                    f"{cfg.max_num_batched_tokens:,} | {cfg.gpu_memory_utilization} | "
                    f"{(plan.requested_bytes - kv) / GIB:.2f} | {plan.non_kv_bytes / GIB:.2f} | "
                    f"{plan.weight_bytes / GIB:.2f} |")
    return rows


def speed_loss(points: list[Point], values: list[dict[str, float]]) -> float:
    """Sum of squared log errors of throughput, p99 ITL and median ITL (NaN: refused)."""
    total = 0.0
    for p, v in zip(points, values):
        for k in ("output_throughput", "p99_itl_ms", "median_itl_ms"):
            if not (v[k] > 0):
                return 1e9
            total += math.log(v[k] / p.measured[k]) ** 2
    return total


def fit_speed(points: list[Point], consts, progress: Callable[[str], None],
              max_evals: int = 160, keys: tuple[str, ...] = SPEED_KEYS,
              simulate_with: Callable | None = None) -> dict[str, float]:
    """Nelder-Mead over the log of the constants ``keys`` (all positive); ``simulate_with``
    (points, consts) -> values, by default ``simulate`` (the 11-29 study's workload)."""
    from scipy.optimize import minimize

    run = simulate_with or simulate
    x0 = np.log([max(getattr(consts, k), 1e-3) for k in keys])
    calls = [0]

    def loss(x: np.ndarray) -> float:
        vals = dict(zip(keys, np.exp(x)))
        if vals.get("compute_efficiency", 0) > 1 or vals.get("bandwidth_efficiency", 0) > 1 \
                or any(vals.get(k, 0) > 0.5 for k in SHARES):
            return 1e9
        k = dataclasses.replace(consts, **vals)
        out = speed_loss(points, run(points, k))
        calls[0] += 1
        if calls[0] % 10 == 0:
            progress(f"  fit: {calls[0]} evaluations, loss {out:.4f}")
        return out

    res = minimize(loss, x0, method="Nelder-Mead",
                   options={"maxfev": max_evals, "xatol": 0.01, "fatol": 1e-4,
                            "initial_simplex": _simplex(x0)})
    fitted = dict(zip(keys, np.exp(res.x)))
    return {k: round(float(v), DIGITS[k]) for k, v in fitted.items()}


def _simplex(x0: np.ndarray) -> np.ndarray:
    """A starting simplex of +-30% steps (Nelder-Mead's default 5% is too timid here)."""
    rows = [x0]
    for i in range(len(x0)):
        x = x0.copy()
        x[i] += math.log(1.3) if i % 2 == 0 else -math.log(1.3)
        rows.append(x)
    return np.array(rows)


# ---- writing ------------------------------------------------------------------------------

NOTES = {
    "bandwidth_efficiency": "fitted to throughput, p99 and median ITL of trials 0-3 (the memory-bound decode and small-budget steps)",
    "step_overhead_ms": "fitted to throughput, p99 and median ITL of trials 0-3 (small-budget steps of trials 2 and 3)",
    "eager_launch_us_per_layer": "fitted to throughput, p99 and median ITL of trials 0-3 (eager trials 1 and 2)",
}


def write_profiles(values: dict[str, float], path: Path = PROFILES, source: str = SOURCE,
                   notes: dict[str, str] = NOTES) -> None:
    """Set each constant's value and source in [engine]; add the ones that are missing."""
    text = path.read_text()
    for key, value in values.items():
        shown = json.dumps(value)
        line = f'{key} = {{ value = {shown}, source = "{source}; {notes[key]}" }}'
        pattern = re.compile(rf"^{re.escape(key)} = \{{.*\}}$", re.M)
        if pattern.search(text):
            text = pattern.sub(lambda _: line, text, count=1)
        else:
            text = text.replace("\n[gpu.h200]", f"{line}\n\n[gpu.h200]", 1)
    path.write_text(text)


def _fmt(k: str, v: float) -> str:
    if not math.isfinite(v):
        return "refused"
    if k == "kv_cache_tokens":
        return f"{v:,.0f}"
    if k == "output_throughput":
        return f"{v:,.0f}"
    return f"{v:,.1f}"


NAMES = {"kv_cache_tokens": "KV-cache tokens", "output_throughput": "output tok/s",
         "p99_itl_ms": "p99 ITL (ms)", "median_itl_ms": "median ITL (ms)",
         "median_ttft_ms": "median TTFT (ms)", "p99_ttft_ms": "p99 TTFT (ms)"}


def render_table(p: Point, before: dict[str, float], after: dict[str, float]) -> str:
    rows = ["| quantity | measured | `vllm bench` (same server) | model before | error | model after | error |",
            "|---|---|---|---|---|---|---|"]
    for k in METRICS:
        vb = p.vllm_bench.get(k)
        rows.append(f"| {NAMES[k]} | {_fmt(k, p.measured[k])} | "
                    f"{_fmt(k, vb) if vb is not None else '-'} | {_fmt(k, before[k])} | "
                    f"{_pct(rel_error(before[k], p.measured[k]))} | {_fmt(k, after[k])} | "
                    f"**{_pct(rel_error(after[k], p.measured[k]))}** |")
    return "\n".join(rows)


def _pct(e: float) -> str:
    return f"{e:+.1%}" if math.isfinite(e) else "-"


def keep_error_section(old: str, new: str) -> str:
    """``new`` with ``old``'s error section (``ERROR_SECTION`` .. ``ERROR_END``) after its title."""
    if ERROR_SECTION not in old or ERROR_END not in old:
        return new
    kept = ERROR_SECTION + old.split(ERROR_SECTION, 1)[1].split(ERROR_END, 1)[0] + ERROR_END
    title, sep, body = new.partition("\n\n")
    return f"{title}\n\n{kept}\n\n{body}"


def describe(flags: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in flags.items() if v is not None)


# The engine constants before this calibration (profiles.toml as of commit 0eddf34): the
# "before" columns of the report are computed with them, whatever profiles.toml holds now.
UNCALIBRATED = {"compute_efficiency": 0.60, "bandwidth_efficiency": 0.80, "step_overhead_ms": 1.5,
                "eager_launch_us_per_layer": 110.0, "piecewise_launch_us_per_layer": 4.0,
                "late_gap_share": 0.0, "late_gap_share_launch_bound": 0.0,
                "doubled_gap_share_multi_prefill": 0.0,
                "unchunked_mixes_decodes": False}


def render_report(points: list[Point], before: list[dict], after: list[dict],
                  fitted: dict[str, float], held_out: list[str], non_kv: list[str],
                  command: str, seconds: float) -> str:
    missed = within_goals(points, after)
    out = [
        "# The simulator against the H200 measurements",
        "",
        "## The calibration of 2026-11-29 (fitted on trials 0-3 of `results/h200/`)",
        "",
        f"Made by `{command}` ({seconds:.0f} s on the 2-core development machine). Measured:",
        "`results/h200/trials.json` (vLLM 0.24.0, one H200, Llama-3-8B shape with dummy weights,",
        "random 1024 in / 128 out, 1,000 requests, closed loop at concurrency 256, 32 warm-ups; see",
        "`README.md`). Model: `tuner.sim.evaluate` with the flags of the `vllm serve` command each",
        "trial ran and the same workload (warm-ups not modelled). \"Before\": the constants and",
        "scheduler as they were before this calibration (commit 0eddf34, all speed constants",
        "assumptions); \"after\": the constants now in `tuner/sim/profiles.toml`. Errors are",
        "model / measured - 1.",
        "",
        f"Goals: KV-cache tokens within {GOALS['kv_cache_tokens']:.0%}, output throughput and p99",
        f"ITL within {GOALS['output_throughput']:.0%}, on every measured configuration. "
        + ("**All met.**" if not missed else "**Missed:** " + "; ".join(missed) + "."),
        "",
        "## What was fitted",
        "",
        f"{len(fitted)} constants from the {len(FIT_TRIALS)} configurations of trials "
        f"{', '.join(map(str, FIT_TRIALS))} (3 timing figures each; the later trials are held "
        "out), plus one structural change; no memory constant (those are read from vLLM's "
        "DEBUG log, `memory-probe.md`):",
        "",
        "- **scheduler**: with chunked prefill off, vLLM 0.24 (V1) still decodes every running",
        "  request in every step and adds whole prompts after them (`unchunked_mixes_decodes`);",
        "  the model used to alternate prefill-only and decode-only steps as vLLM V0 did. Trial 1's",
        "  median ITL of 80.8 ms (a decode step carrying ~3 whole prompts) rules the old rule out.",
    ]
    speed = [k for k in SPEED_KEYS if k in fitted]
    out.append(f"- **speed** ({len(speed)} constants, Nelder-Mead on the log errors of throughput, "
               f"p99 ITL and median ITL, {3 * len(FIT_TRIALS)} figures):")
    for k in speed:
        out.append(f"  `{k}` = {fitted[k]} ({UNCALIBRATED[k]} before)")
    out += [
        "",
        f"{len(fitted)} constants for {3 * len(FIT_TRIALS)} fitted figures. Few, but the eager launch",
        "cost rests on two configurations (trials 1 and 2) and the coalesced fraction on the p99",
        "of three: on the fitted trials read the \"after\" columns as agreement, not validation;",
        "the held-out trials are the validation. The KV-cache sizes and median TTFT are not in",
        "the fit. Left as they were:",
        "`compute_efficiency` (0.60; the prefill-bound p99 ITL of trial 0 agrees with it), all",
        "memory constants, the CUDA-graph and per-sequence constants; the new",
        "`compiled_launch_us_per_layer` (steps above the graph capture size of a compiled model)",
        "keeps the old eager figure, 110 us, since the eager fit says nothing about it.",
        "",
        "Memory outside the KV cache (GiB), as the logged KV-cache size implies and as the model",
        "counts it:",
        "",
        *non_kv,
        "",
        "(Trial 3 stores fp8: its token count implies 16.60 GiB, its logged 81.66 GiB of KV",
        "cache 16.20 GiB; vLLM's fp8 token count is not a whole number of blocks.)",
        "",
        "## Per configuration",
        "",
    ]
    held = [(p, a) for p, a in zip(points, after) if p.trial not in FIT_TRIALS]
    if held:
        out += [f"Held out (not in the fit): trials {', '.join(str(p.trial) for p, _ in held)}. "
                "Their errors, model / measured - 1:", "",
                "| trial | KV-cache tokens | output tok/s | p99 ITL | median ITL |",
                "|---|---|---|---|---|"]
        for p, a in held:
            e = {k: rel_error(a[k], p.measured[k]) for k in
                 ("kv_cache_tokens", "output_throughput", "p99_itl_ms", "median_itl_ms")}
            out.append(f"| {p.trial} | {_pct(e['kv_cache_tokens'])} | "
                       f"{_pct(e['output_throughput'])} | {_pct(e['p99_itl_ms'])} | "
                       f"{_pct(e['median_itl_ms'])} |")
        out.append("")
    for p, b, a in zip(points, before, after):
        tag = "" if p.trial in FIT_TRIALS else " (held out)"
        out += [f"### Trial {p.trial}{tag}", "", f"`{describe(p.flags)}`", "",
                render_table(p, b, a), ""]
    out += ["## Held-out checks", ""] + held_out + [
        "",
        "## Limits",
        "",
        f"- {len(points)} configurations of one model on one GPU with one workload; the H100, A100 and L4",
        "  profiles keep their datasheet and assumed constants (the efficiencies and overheads",
        "  fitted here are engine constants, so they now apply there too, unvalidated).",
        "- KV-cache size: within 2 % on every measured configuration since vLLM 0.24's default",
        "  utilisation is taken as 0.92 (it is not 0.9: its DEBUG log and `vllm/config/cache.py`,",
        "  see `memory-probe.md`) and the non-torch memory (0.22 GiB) and activation size (0.88",
        "  GiB at 8,192 tokens, eager) are read from that log. A compiled start keeps about 0.2-0.5",
        "  GiB more outside the KV cache than the model counts (16.29 vs 16.06 GiB at the defaults);",
        "  the model leaves that out, so compiled configurations read up to 0.5 % high.",
        "- p99 ITL of trial 1 (chunked prefill off) sits on the edge between two modes: our load",
        "  generator read 158 ms and `vllm bench serve` 95 ms on the same server (run-to-run noise",
        "  estimate 52 %). In the model, as in small-budget trials 2 and 3, p99 ITL comes from",
        "  the gap model (`tuner/sim/gaps.py`): shares of token gaps that wait for part of, or",
        "  the whole of, the next step. It is applied to the offline evaluator's percentiles only;",
        "  `tuner sim serve` sends every step's tokens as they come.",
        "- Median TTFT is reported, not fitted, and the model is 3-4x low on the large-budget",
        "  configurations (trials 0, 1): there the model's closed loop settles into admitting each",
        "  new request within a step or two, while vLLM's queue kept 10-20 requests waiting",
        "  (its log: `Running: 226 reqs, Waiting: 14 reqs`); p99 TTFT is closer (+2 to +4 % on trials",
        "  0 and 1, -13 to -16 % on trials 2 and 3). Warm-up requests are not modelled.",
        "- The fp8 KV-cache token count vLLM logs (1,331,425, odd, not a multiple of the block size)",
        "  is 0.5 % below its logged KV memory / 65,536 bytes per token; the model counts whole",
        "  blocks, so a few tenths of a percent remain on fp8 configurations.",
        "",
    ]
    return "\n".join(out)


def held_out_checks(consts) -> list[str]:
    """Predictions on what the fit did not see: trial 5's KV cache (its log has the size; the
    run itself was lost) and `vllm bench serve`'s own figures on trials 0 and 1."""
    from tuner.sim import load_gpu, load_shape
    from tuner.sim.config import resolve
    from tuner.sim.startup import check_start

    flags = {"block_size": 16, "enable_chunked_prefill": False, "enable_prefix_caching": True,
             "enforce_eager": True, "gpu_memory_utilization": 0.76, "kv_cache_dtype": "fp8",
             "max_model_len": 5597, "max_num_batched_tokens": 5597, "max_num_seqs": 49}
    shape, gpu = load_shape(MODEL), load_gpu("h200")
    plan = check_start(resolve(flags, shape, gpu), shape, gpu, consts)
    measured = 1_480_694
    return [f"- Trial 5 (eager, fp8, utilisation 0.76, budget 5,597, 49 sequences; measured but "
            f"lost to an interrupt, so only its log's KV-cache size is usable): measured "
            f"{measured:,} tokens, model {plan.kv_cache_tokens:,} "
            f"({rel_error(plan.kv_cache_tokens, measured):+.1%})."]


def main(argv: list[str] | None = None) -> int:
    from tuner.sim.profiles import engine_constants

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="evaluate only; write nothing")
    ap.add_argument("--report", action="store_true",
                    help="write the report with the constants now in profiles.toml (no fit)")
    ap.add_argument("--max-evals", type=int, default=160, help="speed-fit evaluations")
    args = ap.parse_args(argv)
    started = time.monotonic()
    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    points = measured_points(json.loads(TRIALS.read_text()))
    say(f"{len(points)} measured configurations: trials {[p.trial for p in points]}")
    current = engine_constants(path=PROFILES)
    if args.check:
        after = simulate(points, current)
        for p, e in zip(points, errors(points, after)):
            say(f"trial {p.trial}: " + ", ".join(f"{k} {v:+.1%}" for k, v in e.items()))
        missed = within_goals(points, after)
        worse = unexplained(points, after)
        say("all goals met" if not missed else "\n".join(missed))
        say("beyond the documented gaps: " + ("; ".join(worse) if worse else "nothing"))
        return 0 if not worse else 1
    base = dataclasses.replace(current, **UNCALIBRATED)
    before = simulate(points, base)
    say("before: " + "; ".join(f"trial {p.trial} {', '.join(f'{k} {v:+.1%}' for k, v in e.items())}"
                               for p, e in zip(points, errors(points, before))))
    if args.report:
        fitted = {k: getattr(current, k) for k in SPEED_KEYS}
        calibrated = current
    else:
        start = dataclasses.replace(base, unchunked_mixes_decodes=True)
        fit_points = [p for p in points if p.trial in FIT_TRIALS]
        speed = fit_speed(fit_points, start, say, args.max_evals)
        say(f"speed: {speed}")
        fitted = dict(speed)
        calibrated = dataclasses.replace(start, **speed)
        write_profiles(fitted)
    after = simulate(points, calibrated)
    engine_constants.cache_clear() if hasattr(engine_constants, "cache_clear") else None
    command = ".venv/bin/python bench/calibrate_sim.py" + (" --report" if args.report else "")
    old = REPORT.read_text() if REPORT.exists() else ""
    REPORT.write_text(keep_error_section(old, render_report(
        points, before, after, fitted, held_out_checks(calibrated),
        non_kv_rows(points, calibrated), command, time.monotonic() - started)))
    say(f"wrote {REPORT.relative_to(ROOT)}" + ("" if args.report else f" and {PROFILES.relative_to(ROOT)}"))
    missed = within_goals(points, after)
    say("all goals met" if not missed else "\n".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())

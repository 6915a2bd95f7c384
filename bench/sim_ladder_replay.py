"""Every real rate ladder replayed offline on the simulator's engine core, level by level
(issue 49): the fast companion of ``sim_ladder_error.py``.

    .venv/bin/python bench/sim_ladder_replay.py
    .venv/bin/python bench/sim_ladder_replay.py --set compute_efficiency=0.65 \\
        --front-end-ms 12        # what-if: other engine constants, an API-server delay
    .venv/bin/python bench/sim_ladder_replay.py --fit compute_efficiency front_end_ms
                                 # fit on the ladders not held out, report them all

Reads ``results/<gpu>/rate-ladders/<config>-summary.json`` and each level's per-request file
(`vllm bench serve --save-detailed`: start times, prompt and output lengths, TTFTs, ITLs),
and replays exactly those arrivals and lengths on ``tuner.sim.openloop.run_open_loop`` with
the configuration's flags and the GPU's profile. No HTTP, no clock: far faster than the served
simulator, and the figures carry no client's or server's scheduling noise (the served
simulator, ``sim_ladder_error.py``, checks that path). Real and modelled figures are
computed the same way from per-request values: p99 and median of every ITL, p99 and
median TTFT. The saturated level (all requests at once) is replayed too.

Per configuration and level it prints and writes (bench/results/sim-ladder-replay.md and
.json) the real and modelled figures with the relative error, and the capacity bracket at
the issue's SLO pairs from each curve. A configuration is *held out* when its name is in
the ladders README's held-out list (``HELD_OUT``, chosen before any fit); no ladder has
fitted profiles.toml's constants yet, so by default every configuration is reported with
them. ``--fit`` fits the named constants on the ladders not held out (Nelder-Mead on the log
errors of the four latency figures below saturation) and reports every ladder with them; it
prints and writes its report, never profiles.toml.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.sim.openloop import engine_core, run_open_loop  # noqa: E402
from tuner.sim.profiles import engine_constants  # noqa: E402
from tuner.sim.serveargs import parse_engine_flags  # noqa: E402
from tuner.sim.startup import StartFailure  # noqa: E402

OUT = ROOT / "bench/results/sim-ladder-replay"
# Named in results/h100/rate-ladders/README.md before any fit.
HELD_OUT = frozenset({"chunked-1024", "nonchunked-8192"})
SLO_PAIRS = ((25.0, 1000.0), (50.0, 1000.0))  # (p99 ITL ms, p99 TTFT ms)
LATENCY = ("p99_itl_ms", "median_itl_ms", "p99_ttft_ms", "median_ttft_ms")  # what --fit fits
METRICS = (*LATENCY, "output_throughput")  # tok/s: real, vLLM's; model, first arrival to end


def figures(ttfts: list[float], itls: list[list[float]]) -> dict[str, float]:
    """The four latency figures in ms from per-request TTFTs and ITLs (seconds)."""
    flat = np.concatenate([np.asarray(x, dtype=float) for x in itls if len(x)] or [[math.nan]])
    t = np.asarray(ttfts, dtype=float)
    return {"p99_itl_ms": float(np.percentile(flat, 99)) * 1e3,
            "median_itl_ms": float(np.median(flat)) * 1e3,
            "p99_ttft_ms": float(np.percentile(t, 99)) * 1e3,
            "median_ttft_ms": float(np.median(t)) * 1e3}


def bracket(levels: list[dict[str, Any]], side: str, itl: float, ttft: float) -> str:
    """The capacity bracket of one side (real or model) of a curve at an SLO pair: the last
    offered rate that holds below the first that misses."""
    held = None
    for lv in sorted(levels, key=lambda lv: lv["rate"]):
        f = lv[side]
        if f["p99_itl_ms"] > itl or f["p99_ttft_ms"] > ttft:
            return f"below {lv['rate']:g}" if held is None else f"{held:g}-{lv['rate']:g}"
        held = lv["rate"]
    return f"at least {held:g}" if held is not None else "no level"


def replay_level(detail: dict[str, Any], flags: dict[str, Any], gpu: str, consts,
                 front_end_s: float) -> dict[str, float]:
    core = engine_core(flags, gpu, consts)
    if isinstance(core, StartFailure):
        raise SystemExit(f"error: the model refuses {flags}: {core.message}")
    order = np.argsort(detail["start_times"], kind="stable")
    run = run_open_loop(core, [detail["start_times"][i] for i in order],
                        [detail["input_lens"][i] for i in order],
                        [detail["output_lens"][i] for i in order], front_end_s)
    return {**figures(list(run.ttfts), [list(x) for x in run.itls]),
            "output_throughput": run.output_tokens / run.duration_s}


def ladders(gpus: list[str] | None) -> list[tuple[str, str, list[str], list[tuple[float, Path]]]]:
    """(gpu, config, flags, [(rate, per-request file)]) of every summary with such files."""
    out = []
    for path in sorted(ROOT.glob("results/h*/rate-ladders/*-summary.json")):
        gpu = path.parents[1].name
        if gpus and gpu not in gpus:
            continue
        data = json.loads(path.read_text())
        rungs = [(math.inf if e["request_rate"] in ("inf", None) else float(e["request_rate"]),
                  path.parent / e["file"]) for e in data["levels"]
                 if e.get("file") and "warmup" not in e["file"]
                 and (path.parent / e["file"]).is_file()]
        if rungs:
            out.append((gpu, str(data["config"]), list(data["flags"]), rungs))
    return out


Loaded = list[tuple[str, str, list[str], list[tuple[float, dict, dict]]]]


def load(gpus: list[str] | None) -> Loaded:
    """Every ladder with its levels' per-request data and real figures, read and computed
    once (a fit replays the same levels many times)."""
    out = []
    for gpu, config, flags, rungs in ladders(gpus):
        levels = []
        for rate, file in rungs:
            with gzip.open(file) as f:
                detail = json.load(f)
            real = {**figures(detail["ttfts"], detail["itls"]),
                    "output_throughput": float(detail["output_throughput"])}
            levels.append((rate, detail, real))
        out.append((gpu, config, flags, levels))
    return out


def run(loaded: Loaded, consts, front_end_s: float) -> list[dict[str, Any]]:
    """Each ladder's levels, real and modelled, and its capacity brackets."""
    entries = []
    for gpu, config, flags, rungs in loaded:
        engine = parse_engine_flags(flags)
        levels = []
        for rate, detail, real in rungs:
            model = replay_level(detail, engine, gpu, consts, front_end_s)
            levels.append({"rate": rate, "requests": len(detail["ttfts"]), "real": real,
                           "model": model,
                           "error": {k: model[k] / real[k] - 1 for k in METRICS}})
        finite = [lv for lv in levels if math.isfinite(lv["rate"])]
        entries.append({"gpu": gpu, "config": config, "flags": flags,
                        "held_out": config in HELD_OUT, "levels": levels,
                        "capacity": [{"p99_itl_ms": i, "p99_ttft_ms": t,
                                      "real": bracket(finite, "real", i, t),
                                      "model": bracket(finite, "model", i, t)}
                                     for i, t in SLO_PAIRS]})
    return entries


FRONT_END = "front_end_ms"  # the fit's name for --front-end-ms


def fit(loaded: Loaded, keys: list[str], consts, front_end_ms: float) -> tuple[Any, float]:
    """Nelder-Mead on the squared log errors of the four latency figures at every level
    below saturation of the ladders not held out, from ``consts`` and ``front_end_ms``;
    ``keys`` names engine constants and ``front_end_ms`` (started at 1 ms when 0). Returns
    the fitted constants and front-end delay (ms). Held-out ladders never enter the
    objective."""
    from scipy.optimize import minimize

    fitting = [lad for lad in loaded if lad[1] not in HELD_OUT]
    if not fitting:
        raise SystemExit("error: every ladder is held out; nothing to fit on")
    fitting = [(g, c, f, [lv for lv in rungs if math.isfinite(lv[0])])
               for g, c, f, rungs in fitting]

    def unpack(x):
        values = dict(zip(keys, x))
        fe = values.pop(FRONT_END, front_end_ms)
        return dataclasses.replace(consts, **values), fe

    def loss(x) -> float:
        if min(x) < 0:
            return math.inf
        c, fe = unpack(x)
        errors = [math.log(lv["error"][k] + 1) for e in run(fitting, c, fe / 1e3)
                  for lv in e["levels"] for k in LATENCY]
        return sum(e * e for e in errors)

    # a zero start would give the simplex no room on that axis: the delay starts at 1 ms
    x0 = [(front_end_ms or 1.0) if k == FRONT_END else float(getattr(consts, k)) for k in keys]
    result = minimize(loss, x0, method="Nelder-Mead",
                      options={"maxiter": 60 * len(keys), "xatol": 1e-3, "fatol": 1e-4})
    return unpack(result.x)


def render(entries: list[dict[str, Any]], command: str, fitted: str = "") -> str:
    lines = ["# The simulator replaying real rate ladders offline", "",
             f"Generated by `{command}`. Real / model (error); ms, output_throughput in "
             "tok/s.", "", *fitted.splitlines()]
    for e in entries:
        kind = "held out" if e["held_out"] else "not held out"
        lines += [f"## {e['gpu']} {e['config']} ({kind}; flags: {' '.join(e['flags']) or 'none'})",
                  "", "| offered req/s | requests | " + " | ".join(METRICS) + " |",
                  "|---" * (2 + len(METRICS)) + "|"]
        for lv in e["levels"]:
            cells = [f"{lv['real'][k]:,.1f} / {lv['model'][k]:,.1f} ({lv['error'][k]:+.0%})"
                     for k in METRICS]
            lines.append(f"| {lv['rate']:g} | {lv['requests']} | " + " | ".join(cells) + " |")
        lines += ["", "| SLO pair | real capacity | model capacity |", "|---|---|---|"]
        lines += [f"| p99 ITL <= {c['p99_itl_ms']:g} ms, p99 TTFT <= {c['p99_ttft_ms']:g} ms "
                  f"| {c['real']} req/s | {c['model']} req/s |" for c in e["capacity"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", nargs="+", help="only these results folders (e.g. h100)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="an engine constant other than profiles.toml's (repeatable)")
    ap.add_argument("--front-end-ms", type=float, default=0.0,
                    help="delay from a request's arrival to the engine's queue")
    ap.add_argument("--fit", nargs="+", metavar="NAME",
                    help="fit these engine constants (and front_end_ms) on the ladders not "
                         "held out, then report every ladder with the fitted values")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    consts = engine_constants()
    try:
        overrides = {k: type(getattr(consts, k))(v) for k, v in (s.split("=", 1) for s in args.set)}
        consts = dataclasses.replace(consts, **overrides)
        unknown = [k for k in args.fit or () if k != FRONT_END and not hasattr(consts, k)]
        if unknown:
            raise AttributeError(f"no engine constant {', '.join(unknown)}")
    except (ValueError, AttributeError, TypeError) as exc:
        print(f"error: --set NAME=VALUE with an engine constant's name: {exc}", file=sys.stderr)
        return 2
    loaded = load(args.gpus)
    front_end_ms = args.front_end_ms
    fitted = ""
    if args.fit:
        consts, front_end_ms = fit(loaded, args.fit, consts, front_end_ms)
        values = {k: front_end_ms if k == FRONT_END else getattr(consts, k) for k in args.fit}
        fitted = ("Fitted on the ladders not held out: " + ", ".join(
            f"{k} = {v:.4g}" for k, v in values.items()) + ".\n\n")
    entries = run(loaded, consts, front_end_ms / 1e3)
    command = "python bench/sim_ladder_replay.py " + " ".join(argv if argv is not None
                                                              else sys.argv[1:])
    text = render(entries, command.strip(), fitted)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(entries, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

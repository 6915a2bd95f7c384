"""Every real rate ladder replayed offline on the simulator's engine core, level by level
(issue 49): the fast companion of ``sim_ladder_error.py``.

    .venv/bin/python bench/sim_ladder_replay.py
    .venv/bin/python bench/sim_ladder_replay.py --set compute_efficiency=0.65 \\
        --set front_end_ms=12    # what-if: other engine constants, an API-server delay

Reads ``results/<gpu>/rate-ladders/<config>-summary.json`` and each level's per-request file
(`vllm bench serve --save-detailed`: start times, prompt and output lengths, TTFTs, ITLs),
and replays exactly those arrivals and lengths on ``tuner.sim.openloop.run_open_loop`` with
the configuration's flags, the GPU's profile and its engine constants
(``engine_constants(gpu)``: profiles.toml's, with that GPU's fitted ones). No HTTP, no clock: far faster than the served
simulator, and the figures carry no client's or server's scheduling noise (the served
simulator, ``sim_ladder_error.py``, checks that path). Real and modelled figures are
computed the same way from per-request values: p99 and median of every ITL, p99 and
median TTFT. The saturated level (all requests at once) is replayed too.

Per configuration and level it prints and writes (bench/results/sim-ladder-replay.md and
.json) the real and modelled figures with the relative error, and the capacity bracket at
the issue's SLO pairs from each curve. The fit of those constants, each ladder
held out in turn, is ``sim_fit.py``'s.
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
from tuner.sim.profiles import EngineConstants, engine_constants  # noqa: E402
from tuner.sim.serveargs import parse_engine_flags  # noqa: E402
from tuner.sim.startup import StartFailure  # noqa: E402

OUT = ROOT / "bench/results/sim-ladder-replay"
SLO_PAIRS = ((25.0, 1000.0), (50.0, 1000.0))  # (p99 ITL ms, p99 TTFT ms)
LATENCY = ("p99_itl_ms", "median_itl_ms", "p99_ttft_ms", "median_ttft_ms")
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


def replay_level(detail: dict[str, Any], flags: dict[str, Any], gpu: str,
                 consts) -> dict[str, float]:
    """One level's four latency figures and output throughput on the model."""
    return replay_requests(detail["start_times"], detail["input_lens"], detail["output_lens"],
                           flags, gpu, consts)


def replay_requests(starts, input_lens, output_lens, flags: dict[str, Any], gpu: str,
                    consts) -> dict[str, float]:
    """Requests sent at ``starts`` (seconds, any order) with those lengths, replayed on a
    fresh engine core: the four latency figures and output throughput."""
    core = engine_core(flags, gpu, consts)
    if isinstance(core, StartFailure):
        raise SystemExit(f"error: the model refuses {flags}: {core.message}")
    order = np.argsort(starts, kind="stable")
    run = run_open_loop(core, [starts[i] for i in order], [input_lens[i] for i in order],
                        [output_lens[i] for i in order])
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


def constants(gpu: str, overrides: dict[str, Any]):
    """The GPU's engine constants with ``overrides`` (name: value) in place."""
    return dataclasses.replace(engine_constants(gpu), **overrides)


def run(loaded: Loaded, overrides: dict[str, Any],
        held_out: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Each ladder's levels, real and modelled with the GPU's engine constants and
    ``overrides``, and its capacity brackets; ``held_out`` names the ladders the
    constants were not fitted on (reported as such)."""
    entries = []
    for gpu, config, flags, rungs in loaded:
        engine = parse_engine_flags(flags)
        consts = constants(gpu, overrides)
        levels = []
        for rate, detail, real in rungs:
            model = replay_level(detail, engine, gpu, consts)
            levels.append({"rate": rate, "requests": len(detail["ttfts"]), "real": real,
                           "model": model,
                           "error": {k: model[k] / real[k] - 1 for k in METRICS}})
        finite = [lv for lv in levels if math.isfinite(lv["rate"])]
        entries.append({"gpu": gpu, "config": config, "flags": flags,
                        "held_out": config in held_out, "levels": levels,
                        "capacity": [{"p99_itl_ms": i, "p99_ttft_ms": t,
                                      "real": bracket(finite, "real", i, t),
                                      "model": bracket(finite, "model", i, t)}
                                     for i, t in SLO_PAIRS]})
    return entries


def render(entries: list[dict[str, Any]], command: str) -> str:
    lines = ["# The simulator replaying real rate ladders offline", "",
             f"Generated by `{command}`. Real / model (error); ms, output_throughput in "
             "tok/s. The constants are profiles.toml's for each GPU (with `--set`'s); each "
             "ladder's error with the constants fitted without it: "
             "`bench/results/sim-fit.md`.", ""]
    for e in entries:
        lines += [f"## {e['gpu']} {e['config']} (flags: {' '.join(e['flags']) or 'none'})",
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


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs as engine constants of their declared types; ``ValueError``
    names an unknown constant or a value of the wrong type."""
    fields = {f.name: f for f in dataclasses.fields(EngineConstants)}
    out: dict[str, Any] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in fields:
            raise ValueError(f"no engine constant {name!r}")
        kind = type(getattr(engine_constants(), name))
        out[name] = value.lower() in ("1", "true") if kind is bool else kind(value)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", nargs="+", help="only these results folders (e.g. h100)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="an engine constant other than profiles.toml's (repeatable)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    try:
        overrides = parse_overrides(args.set)
    except ValueError as exc:
        print(f"error: --set NAME=VALUE with an engine constant's name: {exc}", file=sys.stderr)
        return 2
    entries = run(load(args.gpus), overrides)
    command = "python bench/sim_ladder_replay.py " + " ".join(argv if argv is not None
                                                              else sys.argv[1:])
    text = render(entries, command.strip())
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(entries, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`tuner sim serve` (a `vllm serve` stand-in) and `tuner sim grid` (the model's true front)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from tuner.errors import UsageError

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sim", help="the simulated vLLM engine (a model, not a measurement)",
        description="A simulated vLLM engine: a model of vLLM's scheduler and memory, not a "
                    "measurement.")
    sub = parser.add_subparsers(dest="sim_command", metavar="SIM_COMMAND")
    sub.required = True
    from tuner.sim import add_serve_flags

    serve = sub.add_parser("serve", help="serve like `vllm serve` (same flags) on a simulated GPU")
    add_serve_flags(serve)
    serve.set_defaults(func=_serve)

    grid = sub.add_parser("grid", help="evaluate the model over a grid of flags offline and "
                                       "write the true Pareto front as JSON")
    grid.add_argument("study", nargs="?", metavar="STUDY_FILE",
                      help="a study file: grid over its whole search space inside its rules, "
                           "with its model, GPU and workload (the flags below then override)")
    grid.add_argument("--levels", type=int, default=4,
                      help="with STUDY_FILE: values per numeric flag (default 4)")
    grid.add_argument("--model", help="model folder with a config.json")
    grid.add_argument("--gpu", default=None, help="h200 (default), h100, a100-80g, l4")
    grid.add_argument("--concurrency", type=int, default=256)
    grid.add_argument("--num-requests", type=int, default=None, help="default 1000")
    grid.add_argument("--input-len", type=int, default=1024)
    grid.add_argument("--output-len", type=int, default=128)
    grid.add_argument("--range-ratio", type=float, default=0.0)
    grid.add_argument("--num-prefixes", type=int, default=0)
    grid.add_argument("--prefix-len", type=int, default=0)
    grid.add_argument("--seed", type=int, default=0)
    grid.add_argument("--axis", action="append", default=[], metavar="NAME=V1,V2,...",
                      help="replace one axis of the default grid (repeatable)")
    grid.add_argument("--processes", type=int, default=0, help="worker processes (0: all cores)")
    grid.add_argument("--out", required=True, help="JSON file to write")
    grid.set_defaults(func=_grid)


def _serve(args: argparse.Namespace) -> int:
    from tuner.sim import serve

    from tuner.sim import refused

    if not (args.model or args.model_tag):
        raise UsageError("no model: pass --model DIR (a folder with a config.json)")
    refusal = refused(args)
    if refusal:
        raise UsageError(refusal)
    return serve(args)


def _value(text: str):
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


def _axes(specs: list[str]) -> dict:
    from tuner.sim import FLAG_NAMES
    from tuner.sim import DEFAULT_AXES

    axes = dict(DEFAULT_AXES)
    for spec in specs:
        name, sep, values = spec.partition("=")
        if not sep or name not in FLAG_NAMES or not values:
            raise UsageError(f"--axis {spec!r}: write NAME=V1,V2 with NAME one of {', '.join(FLAG_NAMES)}")
        axes[name] = tuple(_value(v) for v in values.split(","))
    return axes


def _study_grid(args: argparse.Namespace):
    """(model dir, GPU, workload, grid points, axes) of a study file's whole search space."""
    from tuner.sim import from_study
    from tuner.space import build_space
    from tuner.space.grid import space_grid
    from tuner.storage import load_study_file

    spec = load_study_file(args.study)
    model = Path(args.model or spec.model.path)
    if not (model / "config.json").is_file():
        raise UsageError(f"the study's model folder {model} has no config.json here; pass "
                         "--model DIR (a folder with the model's config.json)")
    if args.axis:
        raise UsageError("--axis replaces axes of the default grid; with a STUDY_FILE the "
                         "grid is the study's space (use --levels)")
    workload = from_study(spec.workload, args.num_requests)
    axes, points = space_grid(build_space(spec), args.levels)
    return model, args.gpu or spec.hardware.gpu, workload, points, axes


def _grid(args: argparse.Namespace) -> int:
    from tuner.sim import evaluate_grid, grid_points, pareto_front
    from tuner.sim import load_gpu
    from tuner.sim import load_shape
    from tuner.loadgen.spec import build
    from tuner.sim import SimWorkload

    if args.study:
        model, gpu_name, workload, points, axes = _study_grid(args)
    else:
        if not args.model:
            raise UsageError("pass a STUDY_FILE, or --model DIR (a folder with a config.json)")
        model, gpu_name = Path(args.model), args.gpu or "h200"
        workload = build(
            SimWorkload, max_concurrency=args.concurrency, num_requests=args.num_requests or 1000,
            input_len=args.input_len, output_len=args.output_len,
            range_ratio=args.range_ratio, num_prefixes=args.num_prefixes,
            prefix_len=args.prefix_len, seed=args.seed)
        axes = _axes(args.axis)
        points = grid_points(axes)
    shape, gpu = load_shape(model), load_gpu(gpu_name)
    log.info("tuner sim grid: %d configurations of %d flags (%s before the rules)",
             len(points), len(axes), " x ".join(str(len(v)) for v in axes.values()))
    t0 = time.monotonic()

    def progress(done: int, total: int) -> None:
        if done % 50 == 0 or done == total:
            rate = done / max(1e-9, time.monotonic() - t0) * 60
            print(f"\rtuner sim grid: {done}/{total} configurations ({rate:,.0f}/min)",
                  end="" if done < total else "\n", file=sys.stderr, flush=True)

    outcomes = evaluate_grid(points, shape, gpu, workload, args.processes or None, progress)
    elapsed = time.monotonic() - t0
    front = pareto_front(outcomes)
    doc = {
        "note": "tuner.sim model output, not a measurement",
        "gpu": gpu_name, "model": str(model), "study": args.study,
        # "concurrency": the grid file's name for the closed loop's max_concurrency; an
        # unpaced request_rate (inf) is written as null, as pydantic writes JSON.
        "workload": {**json.loads(workload.model_dump_json()),
                     "concurrency": workload.max_concurrency},
        "axes": {k: list(v) for k, v in axes.items()},
        "configurations": len(outcomes), "started": sum(o.started for o in outcomes),
        "seconds": round(elapsed, 2), "objectives": {"output_throughput": "max", "p99_itl_ms": "min"},
        "pareto_front": [o.to_dict() for o in front],
        "outcomes": [o.to_dict() for o in outcomes],
    }
    Path(args.out).write_text(json.dumps(doc, indent=1))
    log.info("wrote %s: %d Pareto-optimal of %d configurations in %.0f s", args.out,
             len(front), len(outcomes), elapsed)
    return 0

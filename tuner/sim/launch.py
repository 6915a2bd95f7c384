"""`tuner sim serve`: what vLLM does before it listens, then the HTTP front.

The start checks run before aiohttp is imported, so a refused configuration exits (code 1,
vLLM's message on stderr) as fast as Python starts.
"""

from __future__ import annotations

import os
import sys
import time

from tuner.sim.config import resolve
from tuner.sim.core import EngineCore
from tuner.sim.memory import MemoryPlan
from tuner.sim.profiles import engine_constants, load_gpu
from tuner.sim.serveargs import engine_flags
from tuner.sim.shape import load_shape
from tuner.sim.startup import StartFailure, check_start, startup_lines


def _log(line: str) -> None:
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [tuner.sim] {line}", flush=True)


def prepare(args) -> tuple[EngineCore, MemoryPlan] | StartFailure:
    """Everything vLLM does before it listens: read the model, resolve flags, check memory."""
    model_dir = args.model or args.model_tag
    shape = load_shape(model_dir)
    gpu = load_gpu(args.gpu)
    consts = engine_constants()
    cfg = resolve(engine_flags(args), shape, gpu)
    started = check_start(cfg, shape, gpu, consts)
    if isinstance(started, StartFailure):
        return started
    if args.num_gpu_blocks_override:
        started = MemoryPlan(**{**started.__dict__, "num_blocks": args.num_gpu_blocks_override})
    _log(f"non-default args and resolved config: {cfg}")
    for line in startup_lines(cfg, gpu, started):
        _log(line)
    return EngineCore(cfg, shape, gpu, consts, started), started


def _refusal(failure: StartFailure) -> str:
    """stderr of a refused start: the argument error, or the engine core's failure."""
    if failure.kind == "invalid_config":
        return f"Traceback (most recent call last):\n{failure.message}"
    return (f"ERROR {time.strftime('%m-%d %H:%M:%S')} [core.py] EngineCore failed to start.\n"
            f"Traceback (most recent call last):\n{failure.message}\n"
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}")


def serve(args) -> int:
    """Run the simulated server until a signal; 1 if vLLM would have refused to start."""
    _log("simulated vLLM engine (tuner.sim): timings come from a model, not a GPU")
    prepared = prepare(args)
    if isinstance(prepared, StartFailure):
        print(_refusal(prepared), file=sys.stderr, flush=True)
        return 1
    core, _ = prepared
    if args.sim_cpus:
        try:
            os.sched_setaffinity(0, args.sim_cpus)
        except (OSError, AttributeError) as e:
            print(f"error: --sim-cpus {sorted(args.sim_cpus)}: {e}", file=sys.stderr, flush=True)
            return 2
        _log(f"pinned to CPUs {sorted(args.sim_cpus)}")
    from tuner.sim.server import run

    return run(args, core)

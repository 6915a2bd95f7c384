"""`tuner sim serve`: what vLLM does before it listens, then the HTTP front.

The start checks run before aiohttp is imported, so a refused configuration exits (code 1,
vLLM's message on stderr) as fast as Python starts.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from tuner.sim.compilecache import marker, remember, seen
from tuner.sim.config import resolve
from tuner.sim.core import EngineCore
from tuner.sim.memory import MemoryPlan
from tuner.sim.profiles import engine_constants, load_gpu, start_constants
from tuner.sim.serveargs import engine_flags
from tuner.sim.shape import load_shape
from tuner.sim.starts import StartPhases, compile_key, key_hash, model_start
from tuner.sim.startup import StartFailure, check_start, startup_lines


class StartLog:
    """Prints startup lines as vLLM's processes do, stamped on a simulated clock.

    The clock starts when ``serve`` begins (wall time, whole seconds), and runs in
    modelled seconds, so that ``tuner.engine.startlog.start_phases`` reads the modelled
    phases back from the stamps (to the whole second, as from vLLM's). With ``wait_scale``
    (``--sim-start-delay``) each line waits until its modelled time divided by the time
    scale, so the server listens when the modelled start is over; at time scale 1 the
    stamps then agree with the wall clock. Without it every line is printed at once: the
    stamps run ahead of the wall clock by the modelled start.
    """

    def __init__(self, wait_scale: float | None = None) -> None:
        self.wall0 = time.time()
        self.zero = float(int(self.wall0))
        self.wait_scale = wait_scale
        self.at_s = 0.0

    def line(self, text: str, at_s: float | None = None, process: str = "APIServer") -> None:
        """Print ``text`` at simulated second ``at_s`` (default: the last line's)."""
        self.at_s = self.at_s if at_s is None else at_s
        if self.wait_scale:
            time.sleep(max(0.0, self.wall0 + self.at_s / self.wait_scale - time.time()))
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(self.zero + self.at_s))
        print(f"({process} pid={os.getpid()}) INFO {stamp} [tuner.sim] {text}", flush=True)


@dataclass(frozen=True)
class Prepared:
    """A start that vLLM would make: the engine core, its memory plan, its start phases,
    and the compile cache's marker of its key (None: eager, or no cache)."""

    core: EngineCore
    plan: MemoryPlan
    start: StartPhases
    key: dict | None
    marker: Path | None


def prepare(args, env: Mapping[str, str]) -> Prepared | StartFailure:
    """Everything vLLM does before it listens: read the model, resolve flags, check memory,
    look the compile key up in ``env``'s cache and model the start's phases."""
    model_dir = args.model or args.model_tag
    shape = load_shape(model_dir)
    gpu = load_gpu(args.gpu)
    consts = engine_constants(args.gpu)
    cfg = resolve(engine_flags(args), shape, gpu)
    started = check_start(cfg, shape, gpu, consts)
    if isinstance(started, StartFailure):
        return started
    if args.num_gpu_blocks_override:
        started = MemoryPlan(**{**started.__dict__, "num_blocks": args.num_gpu_blocks_override})
    key = compile_key(cfg, shape, consts)
    path = marker(env, key_hash(key)) if key is not None else None
    start = model_start(cfg, started.weight_bytes, start_constants(), consts,
                        preimported=args.sim_start_path == "preimported",
                        fork=env.get("VLLM_WORKER_MULTIPROC_METHOD") == "fork", hit=seen(path))
    return Prepared(EngineCore(cfg, shape, gpu, consts, started), started, start, key, path)


@dataclass(frozen=True)
class OfflineStart:
    """An offline start of `tuner sim serve ARGV`: the engine core it would serve, its
    startup log as the server prints it, and its time scale (no process, no clock)."""

    core: EngineCore
    log: str
    time_scale: float


def start_offline(argv: Sequence[str], env: Mapping[str, str]) -> OfflineStart | str:
    """What `python -m tuner.sim serve ARGV` (``argv`` from ``serve`` on, or a whole
    command line holding it) starts in the environment ``env``, without starting it:
    the engine core, or the reason it would refuse (its stderr's gist). The compile
    cache's marker is read, never written."""
    import argparse

    from tuner.sim.serveargs import add_serve_flags, refused

    words = list(argv)
    words = words[words.index("serve") + 1:] if "serve" in words else words
    parser = argparse.ArgumentParser(prog="tuner sim serve", exit_on_error=False)
    add_serve_flags(parser)
    try:
        args = parser.parse_args(words)
    except (argparse.ArgumentError, SystemExit) as e:
        return f"invalid arguments: {e}"
    if refusal := refused(args):
        return refusal
    prepared = prepare(args, env)
    if isinstance(prepared, StartFailure):
        return _refusal(prepared)
    lines = startup_lines(prepared.core.cfg, prepared.plan, prepared.start,
                          f"http://{args.host}:{args.port}")
    return OfflineStart(prepared.core, "".join(f"({ln.process}) INFO [tuner.sim] "
                                               f"{ln.text}\n" for ln in lines),
                        args.time_scale)


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
    log = StartLog(args.time_scale if args.sim_start_delay else None)
    prepared = prepare(args, os.environ)
    if isinstance(prepared, StartFailure):
        log.line("simulated vLLM engine (tuner.sim): timings come from a model, not a GPU")
        print(_refusal(prepared), file=sys.stderr, flush=True)
        return 1
    url = f"http://{args.host}:{args.port}"
    for line in startup_lines(prepared.core.cfg, prepared.plan, prepared.start, url):
        log.line(line.text, line.at_s, line.process)
    if args.sim_cpus:
        try:
            os.sched_setaffinity(0, args.sim_cpus)
        except (OSError, AttributeError) as e:
            print(f"error: --sim-cpus {sorted(args.sim_cpus)}: {e}", file=sys.stderr, flush=True)
            return 2
        log.line(f"pinned to CPUs {sorted(args.sim_cpus)}")
    if prepared.key is not None:
        remember(prepared.marker, prepared.key)
    from tuner.sim.server import run

    return run(args, prepared.core)

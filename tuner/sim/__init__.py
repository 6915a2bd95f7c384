"""The simulated vLLM engine: a model of vLLM's scheduler, memory and step time, never a
measurement.

    profiles.toml / profiles.py   GPU profiles and engine constants, each with its source
    shape.py                      the model's shape from config.json
    config.py                     the engine flags with vLLM's defaults resolved
    memory.py                     the memory budget and KV-cache size (vLLM's profiling)
    startup.py                    vLLM's start checks and messages, startup log lines
    starts.py                     a start's phases in seconds, vLLM's compile key (pure)
    compilecache.py               the compile key's marker under VLLM_CACHE_ROOT
    kvcache.py                    paged blocks, prefix caching by block-hash chains
    scheduler.py                  continuous batching, chunked prefill, preemption
    steptime.py                   roofline step time plus overheads
    core.py                       scheduler + step time, advanced step by step (pure)
    engine.py                     the real-time loop (one task, paced writes)
    server.py / openai.py         the aiohttp front with vLLM's routes; metrics.py
    workload.py / grid.py         the offline evaluator, the grid and its Pareto front

The package's names below are its public API (the search benchmark, `tuner sim`'s
commands, the in-process test tier's offline engine: ``start_offline`` and the replays);
nothing outside ``tuner/sim`` imports its modules. The tuner reaches the running
engine only as a process (``python -m tuner.sim serve``), as it reaches vLLM.
"""

import importlib

_EXPORTS = {
    "SimOutcome": "grid", "evaluate": "grid", "evaluate_grid": "grid", "grid_points": "grid",
    "pareto_front": "grid", "GpuProfile": "profiles", "load_gpu": "profiles",
    "ModelShape": "shape", "load_shape": "shape", "shape_from_config": "shape",
    "MODELLED": "shape", "SimWorkload": "workload",
    "from_study": "workload", "DEFAULT_AXES": "grid", "FLAG_NAMES": "config",
    "add_serve_flags": "serveargs", "refused": "serveargs", "help_answer": "serveargs",
    "wants_help_all": "serveargs", "serve": "launch", "start_offline": "launch",
    "OfflineStart": "launch", "run_open_loop": "openloop", "run_closed_loop": "openloop",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    # Lazy, so that `tuner sim serve` starts without importing numpy.
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"tuner.sim.{_EXPORTS[name]}"), name)
    raise AttributeError(name)

"""The simulated vLLM engine: a model of vLLM's scheduler, memory and step time, never a
measurement.

    profiles.toml / profiles.py   GPU profiles and engine constants, each with its source
    shape.py                      the model's shape from config.json
    config.py                     the engine flags with vLLM's defaults resolved
    memory.py                     the memory budget and KV-cache size (vLLM's profiling)
    startup.py                    vLLM's start checks and messages, startup log lines
    kvcache.py                    paged blocks, prefix caching by block-hash chains
    scheduler.py                  continuous batching, chunked prefill, preemption
    steptime.py                   roofline step time plus overheads
    core.py                       scheduler + step time, advanced step by step (pure)
    engine.py                     the real-time loop (one task, per-request queues)
    server.py / openai.py         the aiohttp front with vLLM's routes; metrics.py
    workload.py / grid.py         the offline evaluator, the grid and its Pareto front

Public API for the search benchmark: ``evaluate``, ``evaluate_grid``, ``grid_points``,
``pareto_front``, ``SimOutcome``, ``SimWorkload``, ``ModelShape``, ``GpuProfile``,
``load_gpu``, ``load_shape``.
"""

from tuner.sim.grid import SimOutcome, evaluate, evaluate_grid, grid_points, pareto_front
from tuner.sim.profiles import GpuProfile, load_gpu
from tuner.sim.shape import ModelShape, load_shape
from tuner.sim.workload import SimWorkload

__all__ = ["GpuProfile", "ModelShape", "SimOutcome", "SimWorkload", "evaluate", "evaluate_grid",
           "grid_points", "load_gpu", "load_shape", "pareto_front"]

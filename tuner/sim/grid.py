"""The offline evaluator: the same engine core, run as a discrete-event simulation (no HTTP,
no clock), and the grid over the search space with its true Pareto front.

    outcome = evaluate(flags, shape, gpu, workload)      # one configuration
    outcomes = evaluate_grid(grid_points(...), shape, gpu, workload, processes=2)
    front = pareto_front(outcomes)                       # max throughput, min p99 ITL
"""

from __future__ import annotations

import itertools
import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from tuner.sim.config import EngineConfig, resolve
from tuner.sim.core import EngineCore
from tuner.sim.fastloop import Preempted, run_closed_loop_fast
from tuner.sim.gaps import GapShares
from tuner.sim.gaps import percentile as gap_percentile
from tuner.sim.memory import MemoryPlan
from tuner.sim.profiles import EngineConstants, GpuProfile, engine_constants
from tuner.sim.scheduler import Request
from tuner.sim.shape import ModelShape
from tuner.sim.startup import StartFailure, check_start
from tuner.sim.steptime import launch_bound
from tuner.sim.workload import SimWorkload, max_total_len, prompt_hashes, request_plan


@dataclass(frozen=True)
class SimOutcome:
    """One configuration's result: started, or failed with vLLM's class and message."""

    flags: dict[str, Any]
    started: bool
    failure_kind: str | None = None
    failure_message: str | None = None
    output_throughput: float = 0.0  # output tokens/s
    request_throughput: float = 0.0
    p99_itl_ms: float = math.nan
    median_itl_ms: float = math.nan
    mean_itl_ms: float = math.nan
    p99_ttft_ms: float = math.nan
    median_ttft_ms: float = math.nan
    kv_cache_tokens: int = 0
    preemptions: int = 0
    prefix_cache_hit_rate: float = 0.0
    peak_running: int = 0  # the most requests running at once
    peak_kv_usage: float = 0.0  # the highest KV-cache usage (0-1)
    duration_s: float = 0.0
    steps: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in d.items()}


def _pct(values, q: float) -> float:
    return float(np.percentile(values, q)) * 1000.0 if len(values) else math.nan


def run_closed_loop(core: EngineCore, workload: SimWorkload) -> dict[str, Any]:
    """Drive ``core`` with the workload; client-side metrics as vLLM's benchmark defines them."""
    plan = request_plan(workload)
    hashes = prompt_hashes(workload, core.cfg.block_size) if core.cfg.enable_prefix_caching else None
    n = workload.num_requests
    arrival = [0.0] * n
    last = [0.0] * n
    ttft: list[float] = []
    itl: list[float] = []
    itl_steps: list[int] = []
    step_t: list[float] = []
    step_prefills: list[int] = []
    step_launch_bound: list[bool] = []
    t = 0.0
    issued = 0

    def issue(now: float) -> None:
        nonlocal issued
        i = issued
        issued += 1
        arrival[i] = now
        core.add(Request(i, plan.prompt_lens[i], plan.output_lens[i],
                         list(hashes[i]) if hashes else []))

    for _ in range(min(workload.max_concurrency, n)):
        issue(0.0)
    output_tokens = 0
    while core.has_work():
        step, dt = core.plan_step()
        if not step.work:
            raise RuntimeError("simulated engine stalled with work queued")
        t += dt
        step_launch_bound.append(launch_bound(core.coef, step.num_tokens, len(step.work),
                                              step.num_logits, step.attn_ctx, step.kv_read))
        emitted = core.complete(step, dt)
        step_t.append(t)
        step_prefills.append(0)
        for r in emitted:
            i = r.rid
            if r.output == 1:
                step_prefills[-1] += 1
                ttft.append(t - arrival[i])
            else:
                itl.append(t - last[i])
                itl_steps.append(core.steps)
            last[i] = t
            output_tokens += 1
            if r.finished and issued < n:
                issue(t)
    pool = core.scheduler.pool
    return {
        "duration_s": t, "output_tokens": output_tokens, "itl": itl, "ttft": ttft,
        "itl_steps": itl_steps, "step_t": step_t, "step_prefills": step_prefills,
        "step_launch_bound": step_launch_bound,
        "hit_rate": pool.hits / pool.queries if pool.queries else 0.0,
    }


def evaluate(flags: Mapping[str, Any], shape: ModelShape, gpu: GpuProfile,
             workload: SimWorkload, consts: EngineConstants | None = None,
             fast: bool = True) -> SimOutcome:
    """Start (or refuse) one configuration and run the workload against it.

    ``fast`` uses the lazy-decode loop (``fastloop.py``) unless a preemption occurs; False
    forces the reference scheduler (the same outcome, slower)."""
    consts = consts or engine_constants(gpu.key)
    cfg = resolve(flags, shape, gpu)
    started = check_start(cfg, shape, gpu, consts)
    shown = cfg.flags()
    if isinstance(started, StartFailure):
        return SimOutcome(shown, False, started.kind, started.message)
    if max_total_len(workload) > cfg.max_model_len:
        return SimOutcome(shown, False, "workload_too_long",
                          f"prompt + output up to {max_total_len(workload)} tokens exceeds "
                          f"max_model_len ({cfg.max_model_len})", kv_cache_tokens=started.kv_cache_tokens)
    return _run(cfg, shape, gpu, consts, started, workload, fast)


def _run(cfg: EngineConfig, shape: ModelShape, gpu: GpuProfile, consts: EngineConstants,
         plan: MemoryPlan, workload: SimWorkload, fast: bool = True) -> SimOutcome:
    core = EngineCore(cfg, shape, gpu, consts, plan)
    r = None
    if fast and not cfg.long_prefill_token_threshold:  # the fast path has no chunk cap
        req_plan = request_plan(workload)
        hashes = prompt_hashes(workload, cfg.block_size) if cfg.enable_prefix_caching else None
        try:
            r = run_closed_loop_fast(core, req_plan, hashes, workload.max_concurrency,
                                     workload.num_requests)
            r["itl_counts"] = np.asarray(r["itl_counts"])
            r["itl"] = np.repeat(r["itl_values"], r["itl_counts"])
        except Preempted:  # the reference scheduler handles preemption
            core = EngineCore(cfg, shape, gpu, consts, plan)
    if r is None:
        r = run_closed_loop(core, workload)
    dur = r["duration_s"] or math.nan
    itl, ttft = r["itl"], r["ttft"]
    vals = np.asarray(r.get("itl_values", itl), dtype=float)
    counts = np.asarray(r.get("itl_counts", np.ones(len(itl), dtype=int)))
    # the same requests' next ITL, about the next step's duration (the last step: itself)
    at = np.asarray(r["itl_steps"], dtype=int) - 1
    next_step = np.diff(np.asarray(r["step_t"], dtype=float), append=np.nan)
    nxt = next_step[at] if len(vals) else vals
    nxt = np.where(np.isnan(nxt), vals, nxt)
    kinds = (np.asarray(r["step_launch_bound"], dtype=bool)[at] if len(vals) else vals,
             np.asarray(r["step_prefills"])[at] >= 2 if len(vals) else vals)
    shares = GapShares(consts.late_gap_share, consts.late_gap_share_launch_bound,
                       consts.doubled_gap_share_multi_prefill)

    def pct(q: float) -> float:
        return gap_percentile(vals, counts, nxt, *kinds, q, shares)

    return SimOutcome(
        cfg.flags(), True,
        output_throughput=r["output_tokens"] / dur,
        request_throughput=workload.num_requests / dur,
        p99_itl_ms=pct(99), median_itl_ms=pct(50),
        mean_itl_ms=float(np.mean(itl)) * 1000 if len(itl) else math.nan,
        p99_ttft_ms=_pct(ttft, 99), median_ttft_ms=_pct(ttft, 50),
        kv_cache_tokens=plan.kv_cache_tokens, preemptions=core.preemptions,
        prefix_cache_hit_rate=r["hit_rate"], peak_running=core.peak_running,
        peak_kv_usage=core.peak_kv_usage, duration_s=r["duration_s"], steps=core.steps)


# ---- the grid -------------------------------------------------------------------------

DEFAULT_AXES: dict[str, tuple[Any, ...]] = {
    "max_num_batched_tokens": (128, 256, 512, 1024, 2048, 4096, 8192, 16384),
    "max_model_len": (2048, 4096, 8192),
    "gpu_memory_utilization": (0.5, 0.7, 0.9, 0.95),
    "enable_prefix_caching": (False, True),
    "enable_chunked_prefill": (False, True),
    "enforce_eager": (False, True),
    "max_num_seqs": (64, 256, 1024),
}


def grid_points(axes: Mapping[str, Iterable[Any]] = DEFAULT_AXES) -> list[dict[str, Any]]:
    """Every combination of the axes' values (a full factorial)."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(tuple(axes[n]) for n in names))]


def _evaluate_args(args: tuple) -> SimOutcome:
    return evaluate(*args)


def evaluate_grid(points: list[Mapping[str, Any]], shape: ModelShape, gpu: GpuProfile,
                  workload: SimWorkload, processes: int | None = None,
                  progress: Callable[[int, int], None] | None = None) -> list[SimOutcome]:
    """``evaluate`` over every point, in ``processes`` worker processes (default: all cores)."""
    processes = processes or os.cpu_count() or 1
    jobs = [(dict(p), shape, gpu, workload) for p in points]
    if processes <= 1:
        out = []
        for i, job in enumerate(jobs):
            out.append(_evaluate_args(job))
            if progress:
                progress(i + 1, len(jobs))
        return out
    with ProcessPoolExecutor(processes) as pool:
        out = []
        for i, o in enumerate(pool.map(_evaluate_args, jobs, chunksize=4)):
            out.append(o)
            if progress:
                progress(i + 1, len(jobs))
        return out


def pareto_front(outcomes: Iterable[SimOutcome]) -> list[SimOutcome]:
    """Started outcomes no other beats on both output throughput (max) and p99 ITL (min)."""
    ok = sorted((o for o in outcomes if o.started and math.isfinite(o.p99_itl_ms)),
                key=lambda o: (-o.output_throughput, o.p99_itl_ms))
    front: list[SimOutcome] = []
    best_itl = math.inf
    for o in ok:
        if o.p99_itl_ms < best_itl:
            front.append(o)
            best_itl = o.p99_itl_ms
    return front

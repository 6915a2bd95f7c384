"""The engine core: scheduler plus step-time model, advanced step by step (pure, no clock).

Both the real-time HTTP engine (``engine.py``) and the offline evaluator (``grid.py``) drive
this same object: ``plan()`` picks the next step and says how long it takes; ``complete()``
applies it and returns the requests that emitted a token.
"""

from __future__ import annotations

from tuner.sim.config import EngineConfig
from tuner.sim.memory import MemoryPlan
from tuner.sim.profiles import EngineConstants, GpuProfile
from tuner.sim.scheduler import Request, Scheduler, Step
from tuner.sim.shape import ModelShape
from tuner.sim.steptime import coefficients, step_seconds


class EngineCore:
    """One simulated engine; counters match vLLM's Prometheus metrics."""

    def __init__(self, cfg: EngineConfig, shape: ModelShape, gpu: GpuProfile,
                 consts: EngineConstants, plan: MemoryPlan) -> None:
        self.cfg = cfg
        self.plan = plan
        self.scheduler = Scheduler(cfg, plan.num_blocks, consts.unchunked_mixes_decodes)
        self.coef = coefficients(cfg, shape, gpu, consts)
        self.front_end_s = consts.front_end_ms * 1e-3  # arrival to the queue (API server)
        self.steps = 0
        self.peak_running = 0  # the most requests running in a step (vLLM's gauge's peak)
        self.peak_kv_usage = 0.0  # the highest KV-cache usage in a step, 0-1
        self.busy_s = 0.0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished = 0

    def add(self, req: Request) -> None:
        self.scheduler.add(req)

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def plan_step(self) -> tuple[Step, float]:
        """The next step and its duration in simulated seconds (0 if nothing can run)."""
        s = self.scheduler.schedule()
        self.observe(len(self.scheduler.running))
        return s, step_seconds(self.coef, s.num_tokens, len(s.work), s.num_logits,
                               s.attn_ctx, s.kv_read)

    def observe(self, running: int) -> None:
        """Note a scheduled step's running requests and KV-cache usage (their peaks)."""
        self.peak_running = max(self.peak_running, running)
        self.peak_kv_usage = max(self.peak_kv_usage, self.scheduler.pool.usage())

    def complete(self, step: Step, seconds: float) -> list[Request]:
        emitted = self.scheduler.complete(step)
        self.steps += 1
        self.busy_s += seconds
        self.prompt_tokens += step.num_tokens - step.num_decodes
        self.generation_tokens += len(emitted)
        self.finished += sum(1 for r in emitted if r.finished)
        return emitted

    # The gauges and counters of vLLM's /metrics.
    @property
    def num_running(self) -> int:
        return len(self.scheduler.running)

    @property
    def num_waiting(self) -> int:
        return len(self.scheduler.waiting)

    @property
    def kv_usage(self) -> float:
        return self.scheduler.pool.usage()

    @property
    def preemptions(self) -> int:
        return self.scheduler.preemptions

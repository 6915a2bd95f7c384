"""One trial's benchmark, compiled from the study: what to send, how it arrives and stops,
what counts as a good request, and how long a run may take.

Each further run on the same server (a retry, a confirmation, a ladder level) draws prompts
of its own (``for_run``): the same prompts again would be served from the prefix cache and
measure faster."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.loadgen.ladder import LadderPlan
from tuner.loadgen.spec import SLO, LoadSpec, WorkloadSpec

RUN_SEED_STEP = 7_919


@dataclass(frozen=True)
class BenchmarkPlan:
    """``told``: the metrics the study is told (a run invalid for one of them is rejected);
    ``time_scale``: the simulator's clock (1 for a real engine); ``timeout_s``: the most a
    run (or the whole ladder) may take before the server counts as hung; ``ladder``: the
    load ladder run after the saturated benchmark, ``level_s`` seconds a level (None: no
    ladder)."""

    model: str
    workload: WorkloadSpec
    load: LoadSpec
    slo: SLO
    told: tuple[str, ...]
    time_scale: float = 1.0
    timeout_s: float = 1800.0
    ladder: LadderPlan | None = None
    level_s: float = 60.0

    def for_run(self, run: int) -> WorkloadSpec:
        """The workload of the server's ``run``-th benchmark (0: the first)."""
        return self.workload.model_copy(
            update={"seed": self.workload.seed + run * RUN_SEED_STEP})

"""The in-process tier's engine and benchmark: the simulator's engine core, computed
offline (``tuner.sim.start_offline``, ``run_closed_loop``, ``run_open_loop``), in place of
a `tuner sim serve` process and the load generator's HTTP client. No socket, no process,
no wall clock: a trial's figures are the model's, the same on a busy host as on a quiet one.

    sim = InProcessSim()
    worker = Worker(opened, url, slot, rig=sim.rig(FakeClock()))

``InProcessSim`` is a ``Starter`` (``tuner.engine.supervisor``) and its ``bench`` a
``Bench`` (``tuner.loadgen.benchmark``). A closed-loop run replays the workload's requests
with ``max_concurrency`` clients, an open-loop run (a ladder level) its arrivals; the
metrics are the load generator's own (``calculate_metrics``) over those requests, in
simulated time. What the tier leaves out: the client's lag, the HTTP framing, the steady
window and a run's early stop (``stop_on_miss``): tests of those use the system tier.
``fail_next`` scripts what a real engine does to a trial (a crash during the benchmark, a
client too slow to measure it).
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import math
import os
from pathlib import Path
from typing import Callable, Sequence

from tuner import sim
from tuner.clock import Clock
from tuner.engine.command import Launch
from tuner.errors import EngineExitedError
from tuner.loadgen.arrivals import arrival_times
from tuner.loadgen.benchmark import BenchmarkResult
from tuner.loadgen.client import RequestOutput
from tuner.loadgen.metrics import calculate_metrics
from tuner.loadgen.spec import SLO, LoadSpec, WorkloadSpec
from tuner.loadgen.workloads import take
from tuner.runner.measure import Rig, Slot
from tuner.runner.progress import Progress
from tuner.runner.worker import Summary, Worker
from tuner.storage import open_study
from tuner.testing.clock import FakeClock

LAGGED = "the client lagged: scripted by the in-process tier"


@dataclasses.dataclass
class SimEngine:
    """One offline engine (``tuner.engine.supervisor.Engine``): serving from its start, or
    exited with code 1 where `tuner sim serve` would refuse the flags."""

    url: str
    log_path: Path
    started: sim.OfflineStart | None
    refusal: str = ""
    exit_code: int | None = None
    stopped: bool = False

    def returncode(self) -> int | None:
        return 1 if self.started is None else self.exit_code

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_healthy(self, timeout_s: float) -> float:
        if self.started is None:
            raise EngineExitedError(1, f"server exited with code 1 before it was ready: "
                                    f"{self.refusal.splitlines()[-1] if self.refusal else ''}")
        return 0.0

    def stop(self, grace_s: float = 0.0) -> float:
        self.stopped = True
        return 0.0


class InProcessSim:
    """Engines started offline and benchmarked by replay; ``engines`` keeps every one
    started, in order, ``runs`` every benchmark's ``LoadSpec``."""

    def __init__(self, lagging: bool = False,
                 on_run: Callable[[int], None] | None = None) -> None:
        self.lagging = lagging  # every run measured the client, as on a host too busy
        self.on_run = on_run  # called with each run's index (0, 1...) before it: a test's
        # change of the world while a trial measures, at a point it chooses, not a race
        self.engines: list[SimEngine] = []
        self.runs: list[LoadSpec] = []
        self._next = itertools.count()
        self._scripted: list[str] = []

    def rig(self, clock: Clock) -> Rig:
        """The trial seams of this simulator on ``clock``."""
        return Rig(starter=self, bench=self.bench, clock=clock)

    def fail_next(self, *what: str) -> None:
        """The next benchmarks, one each: "crash" (the engine exits with code 137 during
        it) or "lag" (the run measured the client: no metrics told)."""
        self._scripted.extend(what)

    def __call__(self, launch: Launch, port: int, log_path: Path,
                 gpus: Sequence[int]) -> SimEngine:
        started = sim.start_offline(launch.argv, {**os.environ, **launch.env})
        log_path.parent.mkdir(parents=True, exist_ok=True)
        text = started.log if isinstance(started, sim.OfflineStart) else started
        log_path.write_text("$ " + " ".join(launch.argv) + "\n" + text + "\n")
        engine = SimEngine(f"inproc://sim-{next(self._next)}", log_path,
                           started if isinstance(started, sim.OfflineStart) else None,
                           "" if isinstance(started, sim.OfflineStart) else started)
        self.engines.append(engine)
        return engine

    async def bench(self, base_url: str, model: str, workload: WorkloadSpec, load: LoadSpec,
                    slo: SLO | None = None, *, time_scale: float = 1.0,
                    stop_on_miss: bool = False) -> BenchmarkResult:
        """The run of ``load`` on the engine at ``base_url``, replayed offline."""
        engine = next(e for e in self.engines if e.url == base_url)
        self.runs.append(load)
        if self.on_run is not None:
            self.on_run(len(self.runs) - 1)
        scripted = self._scripted.pop(0) if self._scripted else None
        if scripted == "crash":
            engine.exit_code = 137
        n = load.num_requests
        requests = take(workload, n)
        prompts = [r.prompt_len for r in requests]
        outputs = [max(1, r.output_len) for r in requests]
        core = engine.started.core
        if load.closed_loop:
            run = sim.run_closed_loop(core, load.max_concurrency, prompts, outputs)
            starts = run.starts
        else:
            starts = tuple(arrival_times(n, load.request_rate / time_scale, load.burstiness,
                                         workload.seed))
            run = sim.run_open_loop(core, starts, prompts, outputs)
        outs = [RequestOutput(index=i, success=True, ttft=run.ttfts[i], itl=list(run.itls[i]),
                              itl_per_token=list(run.itls[i]),
                              latency=run.ttfts[i] + sum(run.itls[i]),
                              output_tokens=outputs[i], prompt_len=prompts[i],
                              start_time=starts[i], scheduled_time=starts[i])
                for i in range(n)]
        metrics = calculate_metrics(outs, run.duration_s, slo)
        lag = LAGGED if scripted == "lag" or self.lagging else None
        return BenchmarkResult(metrics={k: v for k, v in metrics.items()
                                        if not isinstance(v, float) or math.isfinite(v)},
                               failures={}, server={}, client={}, valid=lag is None,
                               invalid_reason=lag, lag_reason=lag, noise={})


def in_process_worker(name: str, url: str, folder: Path, sim: InProcessSim, clock: Clock, *,
                      gpus: tuple[int, ...] = (0,), n_trials: int | None = None,
                      timeout_s: float | None = None, stream=None) -> Worker:
    """A worker of stored study ``name`` whose trials run on ``sim`` and ``clock``, its
    logs under ``folder``, its progress written to ``stream`` (default stderr). Made as
    ``Worker.open`` makes one, less the host's checks (the engine program, the flags its
    engine knows), which are the system tier's."""
    opened = open_study(name, url, heartbeat=True)
    slot = Slot(gpus, folder / "logs", "", "in-process")
    return Worker(opened, url, slot, n_trials, timeout_s,
                  Progress(opened.spec.search.n_trials, stream), rig=sim.rig(clock))


def run_in_process(name: str, url: str, folder: Path, sim: InProcessSim | None = None,
                   clock: Clock | None = None, **kw) -> tuple[Summary, str]:
    """Run a worker of stored study ``name`` to its end (``in_process_worker``, with
    ``kw``) on ``sim`` and ``clock`` (by default fresh ones): its summary, and what its
    progress said."""
    said = io.StringIO()
    worker = in_process_worker(name, url, folder, sim or InProcessSim(), clock or FakeClock(),
                               stream=said, **kw)
    return worker.run(), said.getvalue()

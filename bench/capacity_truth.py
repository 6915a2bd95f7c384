"""The capacity benchmark's ground truth: each configuration's capacity at an SLO pair and
its p99 ITL at the reference rate, from open-loop replays on the simulator's engine core.

A configuration's *true* capacity at (p99 ITL limit, p99 TTFT limit) is the highest
Poisson request rate whose replay meets both limits, found by bisection in log-rate to
``TOLERANCE``: each replay sends the rate x ``LEVEL_S`` requests (within ``MIN_REQUESTS`` and
``REQUESTS``) of the study's workload (its lengths
and shared prefixes) whose arrival times are one fixed unit-rate Poisson sequence divided
by the rate (so a replay at a higher rate is the same traffic, faster), and is judged on the
p99 of all its ITLs and of all its TTFTs, as ``vllm bench serve`` computes them. No HTTP, no
clock, no ladder: the fine grid of one configuration, not a ladder's estimate of it.

Outcomes are cached on disk (``search_truth.CACHE``) keyed by the simulator's source
(``search_truth.model_version``): a refit of ``tuner/sim/profiles.toml`` re-simulates.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from search_truth import (CACHE, ROOT, Truth, default_outcome, model_version,
                          save_outcomes)
from tuner.sim.openloop import engine_core
from tuner.sim.scheduler import Request
from tuner.sim.startup import StartFailure
from tuner.sim.workload import from_study, prompt_hashes, request_plan
from tuner.spec import StudySpec
from tuner.trials import record

LEVEL_S = 10.0  # seconds of arrivals per replay (the H100 studies' ladder levels: 15-20 s)
MIN_REQUESTS, REQUESTS = 40, 300  # requests per replay: rate x LEVEL_S within these
TOLERANCE = 0.04  # the bisection stops when the bracket is within 4 % (the noise: 7 %)
LOW_SHARE, HIGH_SHARE = 0.02, 1.25  # the bracket: x the configuration's saturated req/s
ARRIVAL_SEED = 1
TTFT_MS = 1000.0
# Both SLO pairs of each profile (p99 ITL ms, p99 TTFT ms): an interactive and a loose one
SLO_PAIRS = {"itl25": (25.0, TTFT_MS), "itl50": (50.0, TTFT_MS)}
REFERENCE_SHARE = 0.25  # the reference rate: a quarter of the default's saturated req/s


@dataclass(frozen=True)
class CapacityProfile:
    """One study profile at one SLO pair: the study spec made a capacity study."""

    name: str
    slo: str
    spec: StudySpec
    base: Any  # search_truth.Profile (space, workload)
    reference_rate: float

    @property
    def key(self) -> str:
        return f"{self.name}/{self.slo}"


def capacity_spec(spec: StudySpec, itl_ms: float, ttft_ms: float, rate: float) -> StudySpec:
    """``spec`` as a capacity study: capacity_rps and the p99 ITL at ``rate``, within the SLO
    pair, no confirmation runs (a ladder study refuses them)."""
    data = spec.model_dump()
    data["objectives"] = [{"metric": "capacity_rps", "direction": "maximize"},
                          {"metric": "reference_p99_itl_ms", "direction": "minimize"}]
    data["slo"] = {"p99_itl_ms": itl_ms, "p99_ttft_ms": ttft_ms}
    data["capacity"] = {**data.get("capacity", {}), "reference_rate": rate}
    data["search"] = {**data["search"], "confirm": 0, "confirm_default": 0}
    return StudySpec.model_validate(data)


def load_capacity_profile(name: str, slo: str, truth: Truth) -> CapacityProfile:
    """The study file ``name`` at SLO pair ``slo``, its reference rate from the default's
    saturated request rate (``truth``: the closed-loop outcomes of ``name``)."""
    base = truth.profile
    d = default_outcome(truth)
    sat = d["output_throughput"] / base.workload.output_len if d["started"] else 1.0
    rate = float(f"{REFERENCE_SHARE * sat:.2g}")
    itl, ttft = SLO_PAIRS[slo]
    spec = capacity_spec(base.spec, itl, ttft, rate)
    space = base.space  # the SLOs and objectives do not change the space
    return CapacityProfile(name, slo, spec, type(base)(name, base.rules, spec, space,
                                                       base.workload), rate)


def load_rules(name: str) -> str:
    """The rule set the study file names (``[space] rules``)."""
    import tomllib
    data = tomllib.loads((ROOT / "studies" / f"{name}.toml").read_text())
    return data.get("space", {}).get("rules", "article")


class CapacityTruth:
    """Per configuration of one profile: started or not, and per SLO pair its capacity, plus
    its p99 ITL and TTFT at the reference rate (memoised in memory and on disk)."""

    def __init__(self, closed: Truth, reference_rate: float) -> None:
        self.closed = closed
        self.reference_rate = reference_rate
        self.workload = from_study(closed.profile.spec.workload, REQUESTS)
        self.path = CACHE / (f"capacity-{closed.profile.name}-r{reference_rate:g}"
                             f"-{settings_key()}-{model_version()}.json")
        self.known: dict[str, dict[str, Any]] = (json.loads(self.path.read_text())
                                                 if self.path.is_file() else {})
        self.new: dict[str, dict[str, Any]] = {}
        self._unit = np.cumsum(np.random.default_rng(ARRIVAL_SEED).exponential(1.0, REQUESTS))

    def outcome(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """{"started", "failure", "capacity": {slo: req/s}, "reference_p99_itl_ms",
        "reference_p99_ttft_ms", "request_throughput"} of ``flags``."""
        key = record.flags_key(flags)
        hit = self.known.get(key)
        if hit is None:
            hit = self._evaluate(dict(flags))
            self.known[key] = self.new[key] = hit
        return hit

    def _evaluate(self, flags: dict[str, Any]) -> dict[str, Any]:
        closed = self.closed.outcome(flags)
        if not closed["started"]:
            return {"flags": flags, "started": False, "failure": closed["failure"]}
        sat = closed["output_throughput"] / max(1, self.closed.profile.workload.output_len)
        runs: dict[float, tuple[float, float]] = {}

        def p99s(rate: float) -> tuple[float, float]:
            if rate not in runs:
                runs[rate] = self._replay(flags, rate)
            return runs[rate]

        caps, low = {}, LOW_SHARE * sat
        # tightest first: a looser pair's capacity is at least the tighter one's
        for name, (itl, ttft) in sorted(SLO_PAIRS.items(), key=lambda kv: kv[1]):
            caps[name] = bisect_capacity(lambda r: _meets(p99s(r), itl, ttft),
                                         low, HIGH_SHARE * sat, TOLERANCE)
            low = max(low, caps[name])
        ref_itl, ref_ttft = p99s(self.reference_rate)
        return {"flags": flags, "started": True, "failure": None, "capacity": caps,
                "reference_p99_itl_ms": ref_itl, "reference_p99_ttft_ms": ref_ttft,
                "request_throughput": closed["output_throughput"]
                / max(1, self.closed.profile.workload.output_len), "replays": len(runs)}

    def _replay(self, flags: dict[str, Any], rate: float) -> tuple[float, float]:
        """(p99 ITL ms, p99 TTFT ms) of ``REQUESTS`` Poisson arrivals at ``rate``."""
        profile = self.closed.profile
        core = engine_core(flags, profile.spec.hardware.gpu, shape=self.closed.shape)
        if isinstance(core, StartFailure):  # the closed loop started it: never here
            return math.inf, math.inf
        hashes = (prompt_hashes(self.workload, core.cfg.block_size)
                  if core.cfg.enable_prefix_caching else None)
        n = int(min(REQUESTS, max(MIN_REQUESTS, rate * LEVEL_S)))
        return replay(core, self._unit[:n] / rate, request_plan(self.workload), hashes)

    def save(self) -> None:
        if self.new:
            save_outcomes(self.path, self.known)
            self.new = {}

    def merge(self, entries: Mapping[str, dict[str, Any]]) -> None:
        self.known.update(entries)
        self.new.update(entries)


def settings_key() -> str:
    """What of this module decides an outcome, as a short hash: part of the cache's key."""
    import hashlib
    parts = (LEVEL_S, MIN_REQUESTS, REQUESTS, TOLERANCE, LOW_SHARE, HIGH_SHARE, ARRIVAL_SEED,
             sorted(SLO_PAIRS.items()), REFERENCE_SHARE)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:8]


def _meets(p99: tuple[float, float], itl: float, ttft: float) -> bool:
    return p99[0] <= itl and p99[1] <= ttft


def bisect_capacity(meets, low: float, high: float, tolerance: float) -> float:
    """The highest rate in [low, high] at which ``meets(rate)`` holds, by bisection in
    log-rate until the bracket is within ``tolerance``: 0 when ``low`` misses, ``high``
    when it holds (censored), else the bracket's lower end."""
    if not meets(low):
        return 0.0
    if meets(high):
        return high
    while high / low > 1 + tolerance:
        mid = math.sqrt(low * high)
        if meets(mid):
            low = mid
        else:
            high = mid
    return low


def replay(core, arrivals, plan, hashes) -> tuple[float, float]:
    """Requests arriving at ``arrivals`` (s) on ``core`` until all finish: (p99 ITL ms, p99
    TTFT ms) over every ITL and every TTFT. ``tuner.sim.openloop.run_open_loop`` with the
    workload's shared-prefix block hashes (prefix caching), which it does not pass."""
    n = len(arrivals)
    ttft = np.zeros(n)
    last = np.zeros(n)
    itls: list[float] = []
    t, joined = 0.0, 0
    while joined < n or core.has_work():
        while joined < n and arrivals[joined] <= t:
            core.add(Request(joined, plan.prompt_lens[joined], plan.output_lens[joined],
                             list(hashes[joined]) if hashes else []))
            joined += 1
        if not core.has_work():
            t = float(arrivals[joined])
            continue
        step, dt = core.plan_step()
        if not step.work:
            return math.inf, math.inf  # a request this configuration can never schedule
        t += dt
        for r in core.complete(step, dt):
            if r.output == 1:
                ttft[r.rid] = t - arrivals[r.rid]
            else:
                itls.append(t - last[r.rid])
            last[r.rid] = t
    itl = float(np.percentile(itls, 99)) * 1e3 if itls else math.inf
    return itl, float(np.percentile(ttft, 99)) * 1e3

"""One capacity study on the simulator's capacity truth, with the runner's trial behaviour.

As ``search_run.run_one``: ``propose`` (baselines as given, proposals repaired through
the rules, rule-infeasible ones told at once), ``already_measured`` (duplicates told the
earlier result, no launch), ``record.infeasible`` for a configuration that does not start.
A launched trial's *measurement* is its true capacity and true p99 ITL at the reference
rate (``capacity_truth``) each times ``1 + noise N(0, 1)`` (independent draws), told with
a 95 % interval of +-1.96 x noise around the told capacity, as a ladder tells its own.
"""

from __future__ import annotations

import dataclasses
import random
import time
import warnings
from typing import Any

import optuna

from capacity_score import Trial
from capacity_truth import CapacityProfile, CapacityTruth
from search_run import (MAX_DUPLICATES_IN_A_ROW, Contender, _tell, ask_timed,
                        rules_infeasible, tell_duplicate)
from start_cost import StartCost
from tuner.runner.proposal import propose
from tuner.search import FrontSettings, warm_start
from tuner.trials import record


def measure(cp: CapacityProfile, truth: CapacityTruth, flags, base, noise: float,
            rng: random.Random):
    """The record a ladder trial would tell, and the true outcome."""
    o = truth.outcome(flags)
    if not o["started"]:
        return record.infeasible(cp.spec, {"class": o["failure"], "message": "",
                                           "log_tail": ""}, base), o
    cap = o["capacity"][cp.slo] * (1 + noise * rng.gauss(0.0, 1.0))
    cap = max(0.0, cap)
    ref = o["reference_p99_itl_ms"]
    metrics = {"capacity_rps": cap, "capacity_rps_lower": cap * (1 - 1.96 * noise),
               "capacity_rps_upper": cap * (1 + 1.96 * noise), "capacity_censored": 0.0,
               "reference_p99_itl_ms": ref * (1 + noise * rng.gauss(0.0, 1.0)),
               "reference_p99_ttft_ms": o["reference_p99_ttft_ms"],
               "request_throughput": o["request_throughput"]}
    closed = truth.closed.outcome(flags)
    told = record.measured(cp.spec, metrics, base)
    return dataclasses.replace(told, server=dict(closed.get("server") or {})), o


def run_study(cp: CapacityProfile, truth: CapacityTruth, c: Contender, seed: int,
              n_trials: int, noise: float, cost: StartCost) -> dict[str, Any]:
    """{"trials": [[true capacity, true reference p99 ITL | None, GPU-s]] of the launched
    trials in order, "told": the told capacities, "ask_ms", "duplicates", "stopped"}."""
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    plan = c.plan
    front = FrontSettings.for_study(cp.spec, cp.base.space)
    study = optuna.create_study(directions=[o.direction for o in cp.spec.objectives],
                                sampler=plan.sampler_for(seed, front=front))
    if plan.warm_start:
        warm_start(study, cp.base.space)
    dists = cp.base.space.distributions()
    rng = random.Random(seed)
    gpus = int(cp.base.space.fixed.get("tensor_parallel_size", 1) or 1)
    trials: list[list[Any]] = []
    told_caps: list[float] = []
    ask_ms: list[float] = []
    done = dups = dup_run = 0
    stopped = ""
    while done < n_trials:
        if dup_run >= MAX_DUPLICATES_IN_A_ROW:
            stopped = f"{dup_run} duplicates in a row"
            break
        trial, prop, base = ask_timed(study, dists, cp.base.space, ask_ms)
        if prop.infeasible:
            _tell(study, trial, rules_infeasible(cp.spec, prop, base), plan.constraints)
            done += 1
            dup_run = 0
            continue
        if tell_duplicate(study, trial, prop, base, plan.constraints):
            dups += 1
            dup_run += 1
            continue
        dup_run = 0
        told, o = measure(cp, truth, prop.flags, base, noise, rng)
        _tell(study, trial, told, plan.constraints)
        done += 1
        eager = bool(prop.flags.get("enforce_eager"))
        warmup = (cost_warmup(o) if o["started"] else 0.0)
        gpu_s = cost.trial_s(eager, not trials, o["started"], warmup,
                             int(prop.flags.get("tensor_parallel_size", gpus) or gpus))
        cap = o["capacity"][cp.slo] if o["started"] else 0.0
        trials.append([cap, o.get("reference_p99_itl_ms"), gpu_s])
        told_caps.append(told.metric("capacity_rps") or 0.0)
    return {"trials": trials, "told": told_caps, "ask_ms": ask_ms, "duplicates": dups,
            "stopped": stopped}


def cost_warmup(o: dict) -> float:
    from start_cost import WARMUP_REQUESTS
    return WARMUP_REQUESTS / max(o["request_throughput"], 1e-9)


def as_trials(run: dict) -> list[Trial]:
    return [Trial(c, r, g) for c, r, g in run["trials"]]

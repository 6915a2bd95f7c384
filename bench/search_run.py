"""One search run on the simulator's ground truth, with the real runner's trial behaviour.

The runner's own pieces decide each trial: ``propose`` (baseline as given, or the
sampler's proposal repaired through the rule set, or infeasible without a launch),
``already_measured`` (duplicates are told the earlier result and cost no trial) and the
``tuner.trials.record`` outcomes (a configuration that does not start costs a trial and is told
``starts`` = 1 with the study's worst values). Parallel workers are modelled in order:
``workers`` measurements are in flight; rule-infeasible and duplicate proposals are told at
once, as the runner does before launching.
"""

from __future__ import annotations

import dataclasses
import random
import time
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Any

import optuna

from search_slo import meets_slos
from search_truth import Profile, Truth, point
from tuner.runner.proposal import Proposal, propose
from tuner import optuna_adapter
from contenders.plan import SearchPlan
from tuner.search import FrontSettings, warm_start
from tuner.search.front import MOVE
from tuner.space.compile_grid import compile_key
from tuner.trials import queries, record
from tuner.trials.record import TrialRecord

MAX_DUPLICATES_IN_A_ROW = 25  # as tuner.runner.worker
AUTOTUNE_SEQS = (64, 128, 256, 512, 1024)
AUTOTUNE_TOKENS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


@dataclass(frozen=True)
class Contender:
    """A named way to search: a plan (sampler and choices), or vLLM's auto_tune grid."""

    name: str
    plan: SearchPlan | None  # None: the auto_tune grid (max-num-seqs x max-num-batched-tokens)
    workers: int = 1
    seeds: int = 10
    only: str | None = None  # "profile/rules": run there only (slow samplers)
    note: str = ""
    trials: int | None = None  # a longer run than the matrix's (random search's trials to 90%)
    noise: float = 0.0  # the told metrics x (1 + noise * N(0, 1)); scored on the true ones
    # FrontSettings fields changed from the study's (a rule switched off: search_ablation.py)
    settings: tuple[tuple[str, Any], ...] = ()


def _tell(study: optuna.Study, trial: optuna.Trial, told: TrialRecord, constraints: bool) -> None:
    for key, value in told.to_user_attrs().items():
        trial.set_user_attr(key, value)
    if constraints:
        for key, value in told.constraints.items():
            trial.set_constraint(key, value)
    study.tell(trial, list(told.values))


def ask_timed(study: optuna.Study, dists, space, ask_ms: list[float]
              ) -> tuple[optuna.Trial, Proposal, TrialRecord]:
    """Ask ``study`` for a trial and turn it into a proposal on ``space``; the ask's
    milliseconds are appended to ``ask_ms``. Returns the trial, its proposal and the
    proposal's base record."""
    t0 = time.perf_counter()
    trial = study.ask(dists)
    prop = propose(space, trial)
    ask_ms.append((time.perf_counter() - t0) * 1000)
    return trial, prop, prop.record()


def rules_infeasible(spec, prop: Proposal, base: TrialRecord) -> TrialRecord:
    """The record of a proposal the space's rules refuse (``prop.infeasible`` says why)."""
    return record.infeasible(spec, {"class": "rules", "message": prop.infeasible,
                                    "log_tail": ""}, base)


def tell_duplicate(study: optuna.Study, trial: optuna.Trial, prop: Proposal,
                   base: TrialRecord, constraints: bool) -> bool:
    """Tell a proposal that repeats a measured configuration the earlier result, as the
    runner does (no launch); False for a baseline or a new configuration."""
    if prop.baseline:
        return False
    seen = queries.already_measured(queries.load_records(study), prop.flags, trial.number)
    if seen is None:
        return False
    _tell(study, trial, record.duplicate(seen, base), constraints)
    return True


def _enqueue_autotune(study: optuna.Study, profile: Profile, seed: int) -> int:
    """vLLM auto_tune's grid (other flags at vLLM's defaults), in a seeded order."""
    space = profile.space
    combos = [(s, t) for s in AUTOTUNE_SEQS for t in AUTOTUNE_TOKENS]
    random.Random(seed).shuffle(combos)
    for seqs, tokens in combos:
        flags = {**{k: space.defaults[k] for k in space.names}, **space.fixed,
                 "max_num_seqs": seqs, "max_num_batched_tokens": tokens}
        study.enqueue_trial({p.name: flags[p.name] for p in space.params})
    return len(combos)


def _measure(profile: Profile, truth: Truth, prop: Proposal, base: TrialRecord,
             noise: float = 0.0, rng: random.Random | None = None) -> TrialRecord:
    """The runner's record of one launch; with ``noise``, the metrics as a GPU would vary
    them from run to run (the score still uses the true values)."""
    o = truth.outcome(prop.flags)
    if not o["started"]:
        return record.infeasible(profile.spec, {"class": o["failure"], "message": "",
                                                "log_tail": ""}, base)
    metrics = {k: o[k] for k in ("output_throughput", "p99_itl_ms", "p99_ttft_ms")}
    if noise and rng is not None:
        metrics = {k: v * (1 + noise * rng.gauss(0.0, 1.0)) for k, v in metrics.items()}
    return dataclasses.replace(record.measured(profile.spec, metrics, base),
                               server=dict(o.get("server") or {}))


def run_one(profile: Profile, truth: Truth, c: Contender, seed: int,
            n_trials: int = 40, studies: list | None = None) -> dict[str, Any]:
    """Trials in the order they finished: {"points": [[tok/s, p99 ITL] | None], "slo"
    (whether each point met the study's SLOs, as the runner's constraints read them; None
    where nothing was measured), "outcomes", "moves" (what proposed each: "baseline", or
    the ``front:move`` kind and aim), "ask_ms", "duplicates", "stopped", "launches" (each
    launched trial's budget, sequences and compile key: ``search_compile.py``)}; the study is
    appended to ``studies`` when given (for diagnostics that read each trial's flags:
    ``search_moves.py``)."""
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    plan = c.plan or SearchPlan("random", constraints=False)
    front = dataclasses.replace(FrontSettings.for_study(profile.spec, profile.space),
                                **dict(c.settings))
    study = optuna.create_study(directions=[o.direction for o in profile.spec.objectives],
                                sampler=plan.sampler_for(seed, front=front))
    limit = _enqueue_autotune(study, profile, seed) if c.plan is None else None
    if studies is not None:
        studies.append(study)
    if plan.warm_start:
        warm_start(study, profile.space)
    dists = profile.space.distributions()
    points: list[Any] = []
    slo: list[bool | None] = []
    outcomes: list[str] = []
    moves: list[str] = []
    launches: list[list[Any]] = []
    ask_ms: list[float] = []
    running: deque = deque()
    noise_rng = random.Random(seed)
    asked = dups = dup_run = 0
    stopped = ""

    def finish(trial, told: TrialRecord) -> None:
        _tell(study, trial, told, plan.constraints)
        outcome = told.outcome
        outcomes.append(outcome)
        moves.append(_move(study, trial, told))
        if outcome != record.INFEASIBLE:
            launches.append(_launch(told.flags))
        o = truth.outcome(told.flags) if outcome == record.MEASURED else None
        p = point(o) if o is not None else None
        points.append(None if p is None else [-p[0], p[1]])
        slo.append(None if p is None else meets_slos(profile.spec, o))

    while len(outcomes) < n_trials:
        if (len(running) < c.workers and len(outcomes) + len(running) < n_trials
                and (limit is None or asked < limit) and dup_run < MAX_DUPLICATES_IN_A_ROW):
            trial, prop, base = ask_timed(study, dists, profile.space, ask_ms)
            asked += 1
            if prop.infeasible:
                finish(trial, rules_infeasible(profile.spec, prop, base))
                dup_run = 0
                continue
            if tell_duplicate(study, trial, prop, base, plan.constraints):
                dups += 1
                dup_run += 1
                continue
            dup_run = 0
            running.append((trial, prop, base))
            continue
        if not running:
            stopped = ("grid exhausted" if limit is not None and asked >= limit else
                       f"{dup_run} duplicates in a row")
            break
        trial, prop, base = running.popleft()
        finish(trial, _measure(profile, truth, prop, base, c.noise, noise_rng))
    return {"points": points, "slo": slo, "outcomes": outcomes, "moves": moves,
            "ask_ms": ask_ms, "duplicates": dups, "stopped": stopped, "launches": launches}


def _launch(flags) -> list[Any]:
    """[budget, sequences, compile key (None when eager)] of a launched configuration."""
    key = compile_key(flags)
    return [flags.get("max_num_batched_tokens"), flags.get("max_num_seqs"),
            None if key is None else list(key)]


def _move(study: optuna.Study, trial: optuna.Trial, told: TrialRecord) -> str:
    """What proposed a trial: "baseline", the front sampler's move ("probe", "model:ehvi",
    "model:end:0"...; "+0" when nothing was expected to add: the likeliest feasible
    candidate) or "" (another sampler)."""
    if told.baseline:
        return "baseline"
    move = optuna_adapter.stored_trial(study, trial).system_attrs.get(MOVE)
    if not isinstance(move, dict):
        return ""
    name = ":".join(str(move[k]) for k in ("kind", "aim") if k in move)
    return name + ("+0" if move.get("gain", 1.0) <= 0 else "")

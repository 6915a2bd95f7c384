"""One trial from the study's point of view: compile the study into the trial's plans,
choose the steps that follow its benchmark, and measure (``tuner.runner.measure``).

This is the only place in the trial pipeline that reads the whole study."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Mapping

from tuner.errors import TraceError
from tuner.engine import command, preimport
from tuner.engine.ports import reserved_port
from tuner.engine.supervisor import Spawn, plain_start, process_starter
from tuner.runner import crosscheck
from tuner.runner.guard import Guard
from tuner.runner.measure import (CROSSCHECK_RUN, Confirm, Phase, Rig, ServerDied, Slot,
                                  Step, confirm_step, measure, one_level)
from tuner.runner.plans import TrialPlan, compile_trial
from tuner.spec.study import StudySpec
from tuner.trials.record import TrialRecord


def run(spec: StudySpec, launch_flags: Mapping[str, Any], number: int, slot: Slot,
        base: TrialRecord, phase: Phase, confirm: Confirm | None = None,
        guard: Guard | None = None, rig: Rig = Rig()) -> TrialRecord:
    """Measure ``launch_flags`` as trial ``number`` on ``slot``; ``confirm`` says how many
    confirmation runs a first measured run gets, ``guard`` checks a measured trial's outputs
    (timed as phase ``accuracy``), and the slot's ``crosscheck`` runs `vllm bench serve` on
    the same server. The engine is ``rig``'s (``measure.Rig``): by default a process
    started plainly or pre-imported (``engine.start``), on a port reserved among this
    box's workers (``ports.reserved_port``) until the trial ends; a rig's own starter is
    given port 0 and serves where its engine's ``url`` says."""
    ports = reserved_port() if rig.starter is None else contextlib.nullcontext(0)
    with ports as port:
        plan = compile_trial(spec, launch_flags, port, slot.gpus, cache_root=slot.cache,
                             inherited=os.environ)
        if rig.starter is None:
            rig = dataclasses.replace(rig, starter=process_starter(
                preimport.for_study(spec, slot.logs)))
        steps = []
        if confirm is not None and plan.benchmark.ladder is None:  # a ladder's levels repeat
            steps.append(confirm_step(plan, confirm, rig.bench))
        if guard is not None:
            steps.append(accuracy_step(spec, plan, guard, number))
        if slot.crosscheck:
            steps.append(crosscheck_step(spec, plan, preimport.for_study(
                spec, slot.logs / "crosscheck", also=crosscheck.BENCH_ALSO)))
        return measure(plan, slot, base, phase, steps, log_name=f"trial-{number:05d}",
                       rig=rig)


def our_levels(server, plan: TrialPlan) -> crosscheck.OurLevel:
    """Our level at (rate, round) on the live ``server`` for the cross-check
    (``measure.one_level``, the round's own prompts): its figures, or ``{"offered_rps":
    rate, "error": ...}`` when the server died or hung during it or its trace could not be
    read, so that the trial keeps the measurement it already has."""
    def ours(rate: float, k: int) -> dict[str, Any]:
        try:
            return one_level(server, plan, rate, CROSSCHECK_RUN + k).to_json()
        except (ServerDied, TraceError) as e:
            return {"offered_rps": rate, "error": str(e)}
    return ours


def accuracy_step(spec: StudySpec, plan: TrialPlan, guard: Guard, number: int) -> Step:
    """The accuracy guard, where its rules give the trial a role."""
    def check(server, told: TrialRecord, phase: Phase) -> TrialRecord:
        phase("accuracy")
        return guard.check(spec, server.url, plan.engine.model, told, number)
    return Step("accuracy", check, applies=lambda told: bool(guard.role(spec, told)))


def crosscheck_step(spec: StudySpec, plan: TrialPlan, starter: Spawn = plain_start) -> Step:
    """`vllm bench serve` on the trial's server, each run started by ``starter``: as many
    requests as ours completed, or with a ladder at the two rates that bracket the trial's
    capacity."""
    def check(server, told: TrialRecord, phase: Phase) -> TrialRecord:
        phase("crosscheck")
        env = command.engine_environment(os.environ, plan.engine.launch)
        if plan.benchmark.ladder is not None:
            vllm = crosscheck.run_levels(spec, server.url, plan.engine.model, env,
                                         crosscheck.bracket_rates(told.curve),
                                         our_levels(server, plan), phase, starter)
        else:
            vllm = crosscheck.run(spec, server.url, plan.engine.model, env,
                                  crosscheck.num_prompts(told), starter)
        return dataclasses.replace(told, vllm_bench=vllm)
    return Step("crosscheck", check)

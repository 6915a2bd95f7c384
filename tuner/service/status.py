"""A study's status at one moment: workers, trial counts, best so far against the default
baseline, Pareto-front size, hypervolume trend, and time left (``build`` is pure; ``read``
does the two storage reads; ``render`` is the text `tuner status` prints).

Time left = mean wall time of a launched trial (``phases.total``) x trials left in the
budget / live workers; unknown before a trial has finished or while no worker lives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial

from tuner.results.best import pick_best, saturated_limits
from tuner.results.capacity import capacity_label
from tuner.results.gains import gains
from tuner.storage.registry import STOP
from tuner.service.workers import WorkerView, views
from tuner.storage import open_study
from tuner.spec.study import StudySpec
from tuner.storage.database import heartbeat_s
from tuner.trials import (TrialRecord, counted, default_baseline, history, pareto_front,
                          read_records, record, reference_point)
from tuner.trials.capacity_view import capacity_line
from tuner.trials.drift import ReferenceRun, reference_runs
from tuner.trials.reference import study_rule

TREND = 5  # hypervolume values shown


@dataclass(frozen=True)
class Best:
    trial: int
    metric: str
    value: float
    gains: Mapping[str, float | None]  # per objective, % better than the default baseline
    label: str | None = None  # the value as shown: a capacity with its interval
    line: str | None = None   # a capacity study's: capacity first (capacity_view)


@dataclass(frozen=True)
class StudyStatus:
    name: str
    engine: str
    budget: int
    counted: int                        # trials that spent the budget (see Worker)
    counts: Mapping[str, int]           # measured, infeasible, duplicate, failed, ...
    workers: tuple[WorkerView, ...]
    best: Best | None
    default_trial: int | None
    front_size: int
    hypervolume: tuple[float, ...]      # the last few values, oldest first
    mean_trial_s: float | None
    eta_s: float | None
    stop_requested: str | None          # None, "finish" or "now"
    references: tuple[ReferenceRun, ...] = ()  # the default again on later hosts (drift.py)
    default_missing: str | None = None  # why vLLM's defaults have no measurement, none queued
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> int:
        return sum(1 for w in self.workers if w.alive)

    def as_json(self) -> dict[str, Any]:
        return {
            "study": self.name, "engine": self.engine, "budget": self.budget,
            "counted": self.counted, "counts": dict(self.counts), "live_workers": self.live,
            "workers": [{"id": w.id, "host": w.host, "pid": w.pid, "gpus": list(w.gpus),
                         "state": w.state, "alive": w.alive, "trial": w.trial,
                         "phase": w.phase, "phase_elapsed_s": round(w.phase_elapsed_s, 1)}
                        for w in self.workers],
            "best": None if self.best is None else {
                "trial": self.best.trial, "metric": self.best.metric,
                "value": self.best.value, "label": self.best.label, "line": self.best.line,
                "gain_over_default_pct": dict(self.best.gains)},
            "default_trial": self.default_trial, "front_size": self.front_size,
            "hypervolume": list(self.hypervolume), "mean_trial_s": self.mean_trial_s,
            "eta_s": self.eta_s, "stop_requested": self.stop_requested,
            "default_missing": self.default_missing,
            "reference_runs": [{"trial": r.trial, "worker": r.worker, "host": r.host,
                                "default_trial": r.default_trial,
                                "change_pct": dict(r.change)} for r in self.references]}


def counts(records: Sequence[TrialRecord]) -> dict[str, int]:
    out = {k: 0 for k in (record.MEASURED, record.INFEASIBLE, record.DUPLICATE,
                          record.FAILED, record.STOPPED, "running", "queued")}
    for r in records:
        if r.state == "running":
            out["running"] += 1
        elif r.state == "waiting":
            out["queued"] += 1
        elif r.outcome in out:
            out[r.outcome] += 1
        elif r.state == "fail":  # closed by the heartbeat: the worker died
            out[record.FAILED] += 1
    return out


def _best(spec: StudySpec, records: Sequence[TrialRecord]) -> Best | None:
    """The best trial on the study's first objective within its SLOs; with a load ladder
    the SLOs are in the capacity figures already, not limits on the saturated run."""
    limits = saturated_limits(spec.slo.limits(), spec.measures_capacity)
    pick = pick_best(records, spec.objectives, limits, lossless_first=not spec.space.lossy)
    if pick.best is None:
        return None
    g = gains(pick.best, default_baseline(records), spec.objectives)
    label = capacity_label(pick.best) if pick.metric == "capacity_rps" else None
    line = (capacity_line(pick.best, spec.capacity.reference_rate)
            if spec.measures_capacity else None)
    return Best(pick.best.number, pick.metric, pick.best.metric(pick.metric) or 0.0, g, label,
                line)


def default_missing(records: Sequence[TrialRecord]) -> str | None:
    """Why no run of vLLM's defaults is measured, queued or running ("trial 0 failed:
    invalid-measurement; ..."); None when one is."""
    runs = [r for r in records if r.baseline == record.DEFAULT_BASELINE]
    if any(r.measured or not r.told for r in runs):
        return None
    if not runs:
        return "no run of it in the study"
    return "; ".join(f"trial {r.number} {_what_became(r)}" for r in runs)


def _what_became(r: TrialRecord) -> str:
    if r.outcome is None:
        return "was closed by the heartbeat (its worker was lost)"
    if r.failure is not None:
        return f"{r.outcome}: {r.failure.kind or '?'}"
    return str(r.outcome)


def mean_trial_s(records: Sequence[TrialRecord]) -> float | None:
    totals = [float(r.phases["total"]) for r in records
              if isinstance(r.phases, Mapping) and "total" in r.phases]
    return sum(totals) / len(totals) if totals else None


def build(spec: StudySpec, trials: Sequence[FrozenTrial], attrs: Mapping[str, Any],
          now: float, interval_s: float) -> StudyStatus:
    """The status from one read of the study's trials and user attributes (pure), with
    workers' beats ``interval_s`` apart."""
    records = read_records(trials, spec.name)
    goals = spec.objectives
    default = default_baseline(records)
    ref, _ = reference_point(default, goals, study_rule(spec))
    hv = [v for _, v in history([r for r in records if r.outcome != record.STOPPED],
                                goals, ref)]
    workers = tuple(views(attrs, now, interval_s))
    live = sum(1 for w in workers if w.alive)
    mean = mean_trial_s(records)
    left = max(0, spec.search.n_trials - counted(records))
    eta = mean * left / live if mean is not None and live else (0.0 if not left else None)
    stop = attrs.get(STOP)
    return StudyStatus(
        name=spec.name, engine=spec.engine.kind, budget=spec.search.n_trials,
        counted=counted(records), counts=counts(records), workers=workers,
        best=_best(spec, records), default_trial=default.number if default else None,
        front_size=len(pareto_front(records, goals)), hypervolume=tuple(hv[-TREND:]),
        mean_trial_s=mean, eta_s=eta,
        stop_requested=None if not stop else ("now" if stop == "now" else "finish"),
        references=tuple(reference_runs(records, [o.metric for o in goals])),
        default_missing=default_missing(records))


def read(name: str, url: str) -> StudyStatus:
    """One snapshot of a stored study (two reads: trials, then user attributes)."""
    opened = open_study(name, url)
    study = opened.study
    trials = study.get_trials(deepcopy=False)
    attrs = study.user_attrs
    return build(opened.spec, trials, attrs, time.time(), heartbeat_s())


def _duration(s: float | None) -> str:
    if s is None:
        return "unknown"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def render(st: StudyStatus, command: Callable[[str], str] = lambda c: f"`{c}`") -> str:
    """The text of `tuner status`: a header, one line per worker, counts, results;
    ``command`` words a command to run (the CLI adds the storage the user gave)."""
    lines = [f"study {st.name} ({st.engine}): {st.counted}/{st.budget} trials spent, "
             f"{st.live} live worker{'s' if st.live != 1 else ''}"
             + (f", stop requested ({st.stop_requested})" if st.stop_requested else "")]
    for w in st.workers:
        doing = (f"trial {w.trial} {w.phase} for {_duration(w.phase_elapsed_s)}"
                 if w.alive and w.trial is not None else w.phase)
        if w.state == "dead":
            doing = f"last heartbeat {_duration(w.heartbeat_age_s)} ago"
        lines.append(f"  {_life(w):5} {w.id:<24} gpus "
                     f"{','.join(map(str, w.gpus)) or '-':<7} {w.state:<11} {doing}")
    if not st.workers:
        lines.append("  no worker has registered yet")
    c = st.counts
    lines.append(f"trials: {c['measured']} measured, {c['infeasible']} infeasible, "
                 f"{c['duplicate']} duplicates, {c['failed']} failed, {c['stopped']} stopped, "
                 f"{c['running']} running, {c['queued']} queued")
    if st.best is None:
        lines.append("best: no measured trial meets the SLOs yet")
    else:
        g = ", ".join(f"{k} {v:+.1f}%" for k, v in st.best.gains.items() if v is not None)
        vs = (f" ({g} vs the default baseline, trial {st.default_trial})" if g else
              " (the default baseline is not measured yet)")
        value = st.best.line or f"{st.best.metric} {st.best.label or f'{st.best.value:,.1f}'}"
        lines.append(f"best: trial {st.best.trial}, {value}{vs}")
    if st.default_missing:
        again = command(f"tuner enqueue {st.name} --baseline {record.DEFAULT_BASELINE}")
        lines.append(f"default baseline (vLLM's defaults): missing, {st.default_missing}; "
                     f"gains need it: {again} queues it again")
    trend = " -> ".join(f"{v:,.4g}" for v in st.hypervolume) or "-"
    lines.append(f"pareto front: {st.front_size} trials; hypervolume (last "
                 f"{len(st.hypervolume)}): {trend}")
    for r in st.references:
        change = ", ".join(f"{k} {v:+.1f}%" for k, v in r.change.items() if v is not None)
        lines.append(f"reference: trial {r.trial} on {r.host or '?'} ({r.worker or '?'}), the "
                     f"default again: {change} vs trial {r.default_trial}")
    mean = f"{st.mean_trial_s:.0f} s" if st.mean_trial_s is not None else "unknown"
    lines.append(f"time left: {_duration(st.eta_s)} (mean trial {mean}, "
                 f"{max(0, st.budget - st.counted)} trials left)")
    return "\n".join(lines)


def _life(w: WorkerView) -> str:
    return "alive" if w.alive else ("dead" if w.state == "dead" else "ended")

"""A stored capacity study for tests: load-ladder curves without running a server.

``make_capacity_study(storage_url)`` creates a study with a ``[capacity]`` section and
capacity objectives on ``tuner.testing.studies``' Llama-3-8B spec (SLOs: p99 ITL <= 150 ms,
p99 TTFT <= 3 s; reference rate 4 req/s), then asks its three baselines as a worker does
and tells each as measured with a hand-written curve (``CURVES``), its ``capacity_rps``
and reference p99s read from that curve as the runner reads them.

The curves are chosen so that the answers from the curves and the ones from the
saturated runs disagree, as they do on real capacity studies:

- trial 0 (the default) is the only one whose *saturated* run meets the SLOs, but it
  holds them only up to 6 req/s;
- trial 1 holds them up to 8 req/s, the most capacity;
- trial 2 holds p99 ITL <= 20 ms at 4 req/s with the most output tokens/s there, and has
  the lowest p99 ITL at 5 req/s (a level it measured; the others interpolate there).

No saturated run meets p99 ITL <= 20 ms.

``add_judged_trials`` adds two trials whose curves kept their SLO and their levels'
intervals, as a ladder stores them now (``JUDGED``): one whose capacity has an interval,
and one that holds the SLOs at no level (capacity 0) with the lowest p99 ITL at the
reference rate.
"""

from __future__ import annotations

import dataclasses
import random

import optuna

from tuner import optuna_adapter
from tuner.runner.tell import tell
from tuner.slo import Slo
from tuner.space import baselines
from tuner.spec import StudySpec
from tuner.storage import OpenStudy, create_study, open_study
from tuner.testing.studies import metrics_for, study_spec
from tuner.trials import record
from tuner.trials.curve import Curve, Level, objective_figures
from tuner.trials.record import TrialRecord

REFERENCE_RATE = 4.0

# Per baseline, in the order asked: the saturated run's p99 ITL (ms), and its curve's
# levels as (offered req/s, p99 ITL ms, p99 TTFT ms, output tok/s, held at the SLOs).
CURVES = (
    (120.0, ((2.0, 10.0, 100.0, 250.0, True), (4.0, 15.0, 200.0, 500.0, True),
             (6.0, 60.0, 900.0, 740.0, True))),
    (400.0, ((4.0, 30.0, 300.0, 500.0, True), (8.0, 90.0, 1200.0, 990.0, True),
             (12.0, 200.0, 5000.0, 1300.0, False))),
    (500.0, ((4.0, 18.0, 200.0, 520.0, True), (5.0, 35.0, 400.0, 640.0, True),
             (7.0, 170.0, 3500.0, 850.0, False))),
)


def capacity_spec(name: str) -> StudySpec:
    """``study_spec(name)`` measuring capacity: the most req/s within the SLOs, and the
    p99 ITL at ``REFERENCE_RATE``."""
    doc = study_spec(name).model_dump()
    doc["objectives"] = [{"metric": "capacity_rps", "direction": "maximize"},
                         {"metric": "reference_p99_itl_ms", "direction": "minimize"}]
    doc["capacity"] = {"reference_rate": REFERENCE_RATE, "max_levels": 4, "level_s": 8}
    return StudySpec.model_validate(doc)


def _curve(levels) -> Curve:
    return Curve(levels=tuple(Level(offered_rps=rate, achieved_rps=rate, p99_itl_ms=itl,
                                    p99_ttft_ms=ttft, output_throughput=tput, held=held,
                                    requests=int(rate * 8), failed=0, latency_trend=0.0)
                              for rate, itl, ttft, tput, held in levels),
                 tolerance=0.05, verdict="bracketed")


# Curves that kept their SLO, each level's p99s with an interval of +- 5 % (as a ladder
# stores them now): their capacity has an interval. Per trial: the change to vLLM's
# defaults, the saturated run's p99 ITL (ms), and the levels as (offered req/s, p99 ITL
# ms, p99 TTFT ms, output tok/s), each judged by the SLO's verdict.
JUDGED = (
    # p99 TTFT crosses 3 s between the levels at 8 and 10 req/s
    ({"max_num_seqs": 128}, 600.0, ((4.0, 40.0, 500.0, 500.0), (8.0, 120.0, 2000.0, 900.0),
                                    (10.0, 180.0, 4000.0, 1000.0))),
    # misses p99 TTFT at its lowest level (capacity 0), with the lowest p99 ITL there:
    # no other trial dominates it
    ({"max_num_seqs": 64}, 90.0, ((4.0, 10.0, 5000.0, 450.0), (6.0, 14.0, 9000.0, 500.0))),
)


def judged_curve(spec: StudySpec, levels) -> Curve:
    """A curve as the ladder stores it at ``spec``'s SLO: intervals, margins and held."""
    slo = Slo.of(spec.slo.limits(), spec.capacity.tolerance)
    out = []
    for rate, itl, ttft, tput in levels:
        est = {f: {"value": v, "lower": 0.95 * v, "upper": 1.05 * v}
               for f, v in (("p99_itl_ms", itl), ("p99_ttft_ms", ttft))}
        lv = Level(offered_rps=rate, achieved_rps=rate, p99_itl_ms=itl, p99_ttft_ms=ttft,
                   output_throughput=tput, requests=int(rate * 8), failed=0, estimates=est)
        verdict = lv.verdict(slo)
        out.append(dataclasses.replace(lv, held=verdict.held, margins=verdict.to_json()))
    return Curve(levels=tuple(out), tolerance=spec.capacity.tolerance, verdict="bracketed",
                 slo=dict(spec.slo.limits()))


def add_judged_trials(storage_url: str, name: str = "fixture-capacity") -> OpenStudy:
    """Tell the ``JUDGED`` trials on the study ``make_capacity_study`` made, each launched
    as vLLM's defaults with its change (queued as given, then asked as a worker does)."""
    opened = open_study(name, storage_url)
    study = optuna.load_study(study_name=name, storage=optuna_adapter.storage_of(opened.study))
    names = [p.name for p in opened.space.params]
    default = baselines(opened.space)[0].flags
    for change, saturated_itl, levels in JUDGED:
        flags = {**default, **change}
        asked = TrialRecord(flags=flags, launch=dict(change))
        study.enqueue_trial({n: flags[n] for n in names}, user_attrs=asked.to_user_attrs(),
                            skip_if_exists=False)
        trial = study.ask(opened.space.distributions())
        tell(study, trial, _told(opened.spec, asked, saturated_itl,
                                 judged_curve(opened.spec, levels)))
    return open_study(name, storage_url)


def _told(spec: StudySpec, asked: TrialRecord, saturated_itl: float, levels) -> TrialRecord:
    curve = levels if isinstance(levels, Curve) else _curve(levels)
    metrics = {**metrics_for(asked.flags, random.Random(0)), "p99_itl_ms": saturated_itl,
               **objective_figures(curve, REFERENCE_RATE)}
    return record.measured(spec, metrics, TrialRecord(
        baseline=asked.baseline, flags=asked.flags, launch=asked.launch, curve=curve))


def make_capacity_study(storage_url: str, name: str = "fixture-capacity") -> OpenStudy:
    """Create the study (see the module docstring) and tell its three baselines."""
    spec = capacity_spec(name)
    opened, _ = create_study(spec, storage_url)
    study = optuna.load_study(study_name=name,
                              storage=optuna_adapter.storage_of(opened.study))
    dists = opened.space.distributions()
    for saturated_itl, levels in CURVES:
        trial = study.ask(dists)
        a = TrialRecord.from_user_attrs(trial.user_attrs)
        tell(study, trial, _told(spec, a, saturated_itl, levels))
    return open_study(name, storage_url)

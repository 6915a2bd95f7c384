"""A capacity study in one process: the worker's loop on the simulator's engine core
offline (``tuner.testing.sim_bench``) and a scripted clock, real storage, the commands
in this process. Each trial runs its saturated benchmark, then a load ladder on the same
engine; the study is told the capacity within the SLOs and the p99 ITL at the reference
rate, and the record keeps the whole curve. Moved from the integration tier (decision
0049): its claims are the bookkeeping of the curve, the estimate, the progress line and
the commands' answers; the ladder over real HTTP is tests/integration/
test_loadgen_ladder_sim.py's and the capacity trace study's."""

from __future__ import annotations

import re

from optuna.trial import TrialState

from tuner.results import capacity
from tuner.storage import create_study, load_study_file
from tuner.testing.sim_bench import run_in_process
from tuner.testing.sim_studies import SIM, trials_of
from tuner.trials import record
from tuner.trials.curve import Curve

CAPACITY = '''
[[objectives]]
metric = "capacity_rps"
direction = "maximize"
[[objectives]]
metric = "reference_p99_itl_ms"
direction = "minimize"
[capacity]
reference_rate = 4.0
max_levels = 4
level_s = 8
'''


def test_a_capacity_study_tells_capacity_and_keeps_each_trials_curve(storage_url, study_file,
                                                                     tmp_path, run_cli,
                                                                     monkeypatch):
    text = SIM.format(n=48, trials=2, scale=4).replace("p99_itl_ms = 200",
                                                       "p99_itl_ms = 200\np99_ttft_ms = 2000")
    spec = load_study_file(study_file(text + CAPACITY, "cap.toml"))
    assert spec.measures_capacity
    create_study(spec, storage_url)
    monkeypatch.setenv("TUNER_HOME", str(tmp_path))
    summary, said = run_in_process("cap", storage_url, tmp_path)
    assert "budget of 2 trials is spent" in summary.reason, said[-3000:]
    done = [t for t in trials_of("cap", storage_url) if t.state == TrialState.COMPLETE]
    measured = [t for t in done if t.user_attrs["outcome"] == record.MEASURED]
    assert measured, [t.user_attrs.get("failure") for t in done]
    own = capacity.slo_at(spec.slo.limits(), spec.capacity.tolerance)
    for t in measured:
        curve = Curve.of(t.user_attrs["curve"])
        levels = curve.levels
        assert 1 <= len(levels) <= 4
        assert levels[0].offered_rps == 4.0  # the reference rate is measured as it is
        # the curve keeps the SLO it was judged at: the study's, with the ladder's tolerance
        assert curve.own_slo == own and dict(own.limits) == {"p99_itl_ms": 200,
                                                               "p99_ttft_ms": 2000}
        for lv in levels:
            # a level holds exactly when the SLO's one verdict on it holds (its steady
            # requests' p99s and its backlog), the run measured the server and no request
            # failed; one stopped on a certain miss never holds
            verdict = lv.verdict(curve.own_slo)
            assert lv.held == (verdict.held and not lv.failed and lv.invalid_reason is None
                               and not lv.stopped_early), lv
            assert lv.margins == verdict.to_json(), lv
            judged = {"p99_itl_ms", "p99_ttft_ms"} | ({"backlog"} if lv.latency_trend
                                                       is not None else set())
            assert set(lv.margins) == judged, lv
            for margin in lv.margins.values():  # each with its interval (upper None: none)
                assert margin["lower"] <= margin["margin"], lv
                assert margin["upper"] is None or margin["margin"] <= margin["upper"], lv
        m = t.user_attrs["metrics"]
        est = curve.estimate()
        assert m["capacity_rps"] == curve.capacity_rps == est.point
        assert m["capacity_rps_lower"] <= m["capacity_rps"] <= m["capacity_rps_upper"], m
        assert (m["capacity_rps_lower"], m["capacity_rps_upper"]) == (est.lower, est.upper)
        top = max(lv.offered_rps for lv in levels if lv.usable)
        assert m["capacity_rps"] <= top  # nothing past the highest measured level
        assert m["capacity_censored"] == float(est.censored)
        if est.censored:  # every level held: at least the highest
            assert m["capacity_rps"] == top and all(lv.held for lv in levels if lv.usable)
        assert m["reference_p99_itl_ms"] == levels[0].p99_itl_ms
        assert t.values == [m["capacity_rps"], m["reference_p99_itl_ms"]]
        # the SLOs define the capacity; they are not constraints on the saturated run
        assert not any(k.startswith("slo:") for k in t.constraints)
        assert "ladder" in t.user_attrs["phases"]
        assert m["output_throughput"] > 0  # the saturated benchmark stays on the record
    _best_answers_from_the_stored_curves(storage_url, run_cli, spec)
    # status's best is the most capacity, with its interval: the SLOs are in it, not
    # limits on the saturated run
    m = max((t.user_attrs["metrics"] for t in measured), key=lambda m: m["capacity_rps"])
    told = (f"capacity {'>= ' if m['capacity_censored'] else ''}{m['capacity_rps']:.3g} "
            f"[{m['capacity_rps_lower']:.3g}-{m['capacity_rps_upper']:.3g}]")
    # each trial's progress line gives its capacity first, not the saturated run's tok/s
    worker_log = said
    assert re.search(r"trial \d+: measured capacity (>= )?[\d.]+ \[[\d.]+-[\d.]+\]"
                     r"( censored)? req/s on levels? ", worker_log), worker_log[-3000:]
    code, out, err = run_cli("status", "cap", "--storage", storage_url, "--once")
    best = [line for line in out.splitlines() if line.startswith("best:")]
    assert code == 0 and len(best) == 1 and told in best[0], out
    code, out, err = run_cli("report", "cap", "--storage", storage_url, "-o",
                             tmp_path / "r.html")
    assert code == 0, err
    assert (tmp_path / "r-curves.png").stat().st_size > 0  # the front's curves, drawn
    assert 'src="r-curves.png"' in (tmp_path / "r.html").read_text()


def _best_answers_from_the_stored_curves(url, run_cli, spec):
    """`tuner best` (in this process: the command's answers are the subject here, not its
    process) answers at several SLO pairs and rates from the stored curves, with no new
    trial, as the pure answers say; at the study's own SLOs it is the most stored
    capacity; and it refuses a rate past what was measured."""
    import json

    from tuner.results import capacity
    from tuner.storage import open_study
    from tuner.trials import load_records

    opened = open_study("cap", url)
    records = load_records(opened.study)
    count = len(opened.study.trials)
    edge = capacity.highest_measured(records)

    def slo(**limits):
        return capacity.slo_at({**spec.slo.limits(), **limits}, spec.capacity.tolerance)

    own = capacity.most_capacity(records, slo())
    told = [r.metrics["capacity_rps"] for r in records if "capacity_rps" in r.metrics]
    if own is not None:
        assert own.rate == own.trial.metrics["capacity_rps"] == max(told), told
    for itl, ttft in ((200, 2000), (500, 10000), (100, 1500)):
        code, out, err = run_cli("best", "cap", "--storage", url, "--max-itl-p99", itl,
                                 "--max-ttft-p99", ttft, "--format", "json")
        expected = capacity.most_capacity(records, slo(p99_itl_ms=itl, p99_ttft_ms=ttft))
        if expected is None:
            assert code == 1 and "holds" in err, err
            continue
        assert code == 0, err
        doc = json.loads(out)
        assert doc["trial"] == expected.trial.number
        answer = doc["answer"]
        assert answer["rate_rps"] == expected.rate == answer["capacity_rps"]
        assert answer["limits"] == {"p99_itl_ms": itl, "p99_ttft_ms": ttft}
        assert (answer["capacity_rps_lower"], answer["capacity_rps_upper"]) == (
            expected.estimate.lower, expected.estimate.upper)
        assert answer["at_the_limit"] == expected.at_the_limit
        assert expected.rate <= edge
    for rate in (4.0, edge):
        code, out, err = run_cli("best", "cap", "--storage", url, "--rate", rate, "--format",
                                 "json")
        expected = capacity.lowest_latency_at(records, rate, slo())
        assert (code == 0) == (expected is not None), err
        if expected is not None:
            doc = json.loads(out)
            assert doc["trial"] == expected.trial.number
            assert doc["answer"]["p99_itl_ms"] == expected.p99_itl_ms
            assert expected.estimate.point >= rate  # its capacity reaches the rate
    code, out, err = run_cli("best", "cap", "--storage", url, "--rate", edge * 1.5)
    assert code == 1 and "does not extrapolate" in err, err
    assert len(open_study("cap", url).study.trials) == count  # no new trial

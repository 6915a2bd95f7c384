"""The status snapshot over a stored study (SQLite and PostgreSQL): counts, best against
the default baseline, front, hypervolume trend, time left from live workers."""

from __future__ import annotations

from tuner.storage.registry import PREFIX
from tuner.service.status import build, render
from tuner.testing.studies import make_study


def test_status_of_a_stored_study(storage_url):
    opened = make_study(storage_url, "mixed", n=12, in_progress=True)
    study = opened.study
    trials = study.get_trials(deepcopy=False)
    now = 1000.0
    attrs = {PREFIX + "h-1": {"host": "elsewhere", "pid": 1, "gpus": [0], "state": "running",
                              "heartbeat": now - 1, "trial": 12, "phase": "benchmark",
                              "phase_since": now - 30, "started": 1.0},
             PREFIX + "h-2": {"host": "elsewhere", "pid": 2, "gpus": [1], "state": "running",
                              "heartbeat": now - 100, "trial": 11, "phase": "start",
                              "phase_since": now - 200, "started": 2.0}}
    st = build(opened.spec, trials, attrs, now, interval_s=10)
    assert st.counts == {"measured": 9, "infeasible": 1, "duplicate": 1, "failed": 1,
                         "stopped": 0, "running": 1, "queued": 0}
    assert st.counted == 12 and st.budget == 20  # duplicates do not spend the budget
    assert [w.alive for w in st.workers] == [True, False] and st.live == 1
    assert st.best is not None and st.best.trial == 3 and st.default_trial == 0
    assert st.best.gains["output_throughput"] > 0 and st.front_size >= 2
    assert 0 < len(st.hypervolume) <= 5
    assert st.mean_trial_s is None and st.eta_s is None  # the fixture has no phases
    text = render(st)
    assert "1 live worker" in text and "alive h-1" in text and "dead  h-2" in text
    assert "trial 12 benchmark for 30s" in text and "last heartbeat 1m40s ago" in text
    assert "best: trial 3" in text and "time left: unknown" in text


def test_time_left_is_mean_trial_time_by_trials_left_over_live_workers():
    import optuna

    from tuner.testing.studies import study_spec

    spec = study_spec("eta")
    trials = [optuna.trial.create_trial(
        state=optuna.trial.TrialState.FAIL, user_attrs={"outcome": "failed",
                                                        "phases": {"total": total}})
        for total in (10.0, 20.0)]
    live = {"host": "elsewhere", "state": "running", "heartbeat": 99.0, "pid": 1}
    attrs = {PREFIX + "a": live, PREFIX + "b": {**live, "pid": 2}}
    st = build(spec, trials, attrs, now=100.0, interval_s=10)
    assert st.counted == 2 and st.mean_trial_s == 15.0
    assert st.eta_s == 15.0 * (20 - 2) / 2

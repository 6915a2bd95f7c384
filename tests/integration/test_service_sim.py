"""`tuner launch / status / stop` on the simulator: real detached worker processes, real
simulated servers, SQLite storage; GPU ids given on the command line (no NVML)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from optuna.trial import TrialState

from tuner.engine import proctree
from tuner.storage.registry import STOP
from tuner.runner.stopping import trials_without_gain
from tuner.service import LaunchError, launch, read_status, render_status
from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.worker_procs import ServerWatcher, wait_for
from tuner.trials import record
from tuner.trials import load_records
from tuner.testing.cli_fork import run_tuner

SIM = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 128
output_len = 16
max_concurrency = 8
num_requests = {n}
warmup_requests = 0
max_client_lag_ms = 50
min_gap_share = 0.5
[search]
n_trials = {trials}
{search}
[engine]
kind = "sim"
time_scale = {scale}
start_timeout_s = 30
'''


def setup(study_file, tmp_path, name, n=24, trials=8, scale=10, search=""):
    url = f"sqlite:///{tmp_path}/t.db"
    env = {**os.environ, "TUNER_HOME": str(tmp_path / "home"), "TUNER_HEARTBEAT_S": "1",
           "TUNER_STORAGE": url}
    path = study_file(SIM.format(n=n, trials=trials, scale=scale, search=search),
                      f"{name}.toml")
    create_study(load_study_file(path), url)
    return url, env


def tuner(env, *args, timeout=240) -> subprocess.CompletedProcess:
    return run_tuner(args, env=env, timeout=timeout)


def workers(url, name):
    return read_status(name, url).workers


def busy(url, name, phase="benchmark"):
    return next((w for w in workers(url, name) if w.alive and w.phase == phase), None)


def nothing_left(pids) -> bool:
    every = set(pids)
    for p in pids:
        every |= set(proctree.descendants(p))
    return not any(proctree.alive(p) for p in every)


@pytest.mark.slow
def test_launch_status_kill_stop_and_resume(study_file, tmp_path):
    url, env = setup(study_file, tmp_path, "svc", n=160, trials=30, scale=1)
    out = tuner(env, "launch", "svc", "--gpus", "0,1")
    assert out.returncode == 0, out.stderr
    started = workers(url, "svc")
    assert sorted(w.gpus for w in started) == [(0,), (1,)] and all(w.alive for w in started)
    logs = sorted((tmp_path / "home" / "studies" / "svc" / "workers").iterdir())
    assert [p.name for p in logs] == ["gpu0.log", "gpu1.log"]
    pids = [w.pid for w in started]
    with ServerWatcher(pids) as watcher:
        shown = tuner(env, "status", "svc", "--once").stdout
        lines = [line for line in shown.splitlines() if line.startswith("  alive")]
        assert len(lines) == 2 and any("gpus 0 " in x for x in lines), shown
        assert "time left:" in shown and "pareto front:" in shown
        with pytest.raises(LaunchError, match="GPU 1 already runs worker"):
            launch("svc", url, "1,2")  # refused before anything starts

        victim = wait_for(lambda: busy(url, "svc"), 60)
        assert victim, tuner(env, "status", "svc", "--once").stdout
        os.killpg(victim.pid, signal.SIGKILL)
        dead = wait_for(lambda: any(w.id == victim.id and w.state == "dead" and not w.alive
                                    for w in workers(url, "svc")), 10)
        assert dead
        shown = render_status(read_status("svc", url))  # what `tuner status` prints
        assert any(line.startswith("  dead") and victim.id in line
                   for line in shown.splitlines()), shown

        def cut_short():  # trials closed by a heartbeat: the victim's, by the live worker
            # (the status read may be a beat behind the victim, which may have died claiming
            # its next trial: after its heartbeat, before its name). On a loaded machine a
            # live worker's beat can also land after the grace period once, and the victim
            # closed that worker's trial before it died; the worker then tells its
            # measurement to a copy (user attr ``recorded_for``): closed, not lost. A worker
            # writes a trial's outcome before its state, so one killed in between leaves a
            # closed trial whose outcome is one told as finished, not failed.
            return [t for t in open_study("svc", url).study.get_trials(deepcopy=False)
                    if t.state == TrialState.FAIL
                    and t.user_attrs.get("outcome") not in (record.FAILED, record.STOPPED)]

        def victims():
            return [t for t in cut_short() if t.user_attrs.get("worker", victim.id) == victim.id]
        assert wait_for(victims, 20), open_study("svc", url).study.get_trials()
        (killed,) = victims()
        closed = {t.number for t in cut_short()}

        out = tuner(env, "stop", "svc")
        assert out.returncode == 0, out.stderr
    assert watcher.seen and nothing_left(pids + list(watcher.seen))

    # resume: a new launch clears the stop flag, runs the closed trial again, and stops
    out = tuner(env, "launch", "svc", "--gpus", "0")
    assert out.returncode == 0, out.stderr
    assert not open_study("svc", url).study.user_attrs.get(STOP)
    (again,) = [w for w in workers(url, "svc") if w.alive]

    def retried():
        return [t for t in open_study("svc", url).study.get_trials(deepcopy=False)
                if t.system_attrs.get("failed_trial") == killed.number]
    assert wait_for(lambda: [t for t in retried() if t.state == TrialState.COMPLETE], 120)
    assert tuner(env, "stop", "svc").returncode == 0
    assert nothing_left([again.pid])
    trials = open_study("svc", url).study.get_trials(deepcopy=False)
    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL) for t in trials)
    assert all("outcome" in t.user_attrs for t in trials if t.number not in closed)
    assert len(retried()) == 1 and len({t.number for t in trials}) == len(trials)
    assert len(workers(url, "svc")) == 3 and not any(w.alive for w in workers(url, "svc"))


def test_stop_now_stops_the_running_trial_and_leaves_no_process(study_file, tmp_path):
    url, env = setup(study_file, tmp_path, "now", n=400, trials=4, scale=1)
    assert tuner(env, "launch", "now", "--gpus", "3").returncode == 0
    (w,) = workers(url, "now")
    with ServerWatcher([w.pid]) as watcher:
        assert wait_for(lambda: busy(url, "now"), 60)
        out = tuner(env, "stop", "now", "--now")
        assert out.returncode == 0, out.stderr
    assert watcher.seen and nothing_left([w.pid, *watcher.seen])
    trials = open_study("now", url).study.get_trials(deepcopy=False)
    stopped = [t for t in trials if t.user_attrs.get("outcome") == record.STOPPED]
    assert len(stopped) == 1 and stopped[0].state == TrialState.FAIL
    assert any(t.state == TrialState.WAITING for t in trials)  # queued again
    assert "interrupted" in (tmp_path / "home/studies/now/workers/gpu3.log").read_text()


def test_convergence_ends_the_study_within_patience(study_file, tmp_path):
    url, env = setup(study_file, tmp_path, "conv", trials=30, search="patience = 2")
    assert tuner(env, "launch", "conv", "--gpus", "0").returncode == 0
    (w,) = workers(url, "conv")
    assert wait_for(lambda: not proctree.alive(w.pid), 240)
    log = (tmp_path / "home/studies/conv/workers/gpu0.log").read_text()
    assert "hypervolume has not improved for 2 trials" in log, log[-2000:]
    st = read_status("conv", url)
    assert st.counted < 30
    opened = open_study("conv", url)
    from tuner.trials import default_baseline
    from tuner.trials.hypervolume import history, reference_point
    from tuner.trials.reference import study_rule

    records = load_records(opened.study)
    goals = opened.spec.objectives
    ref, _ = reference_point(default_baseline(records), goals, study_rule(opened.spec))
    # one worker: it stopped as soon as two trials in a row brought no gain
    assert trials_without_gain(history(records, goals, ref)) == 2


def test_a_passed_deadline_starts_no_trial(study_file, tmp_path):
    url, env = setup(study_file, tmp_path, "late", trials=30,
                     search='deadline = "2020-01-01T00:00+00:00"')  # long passed at launch
    assert tuner(env, "launch", "late", "--gpus", "0").returncode == 0
    (w,) = workers(url, "late")
    assert wait_for(lambda: not proctree.alive(w.pid), 60)
    log = (tmp_path / "home/studies/late/workers/gpu0.log").read_text()
    assert "the study's deadline" in log and "has passed" in log, log[-2000:]
    assert read_status("late", url).counted == 0

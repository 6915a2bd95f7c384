"""`tuner dashboard` on a storage: it publishes tuner's figures and note on every tuner
study (also an empty one and one with only failed trials) and serves them over HTTP."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import optuna
from optuna_dashboard import get_note, save_note

from tuner import optuna_adapter
from tuner.results.dashboard import FIGURE_IDS, publish
from tuner.storage import open_study
from tuner.testing.studies import dashboard_process, make_study


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _status(url: str, method: str = "GET", body: dict | None = None, host: str = "") -> int:
    """The HTTP status of one request (``host``: a Host header of the caller's choosing)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          **({"Host": host} if host else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_dashboard_serves_every_study_with_figures_and_note(storage_url, tmp_path):
    make_study(storage_url, "empty", name="nothing-yet")
    make_study(storage_url, "only-failed", n=4, name="all-failed")
    with dashboard_process(storage_url, tmp_path / "dashboard.log") as base, \
            socket.create_connection(("127.0.0.1", urlsplit(base).port)):
        # An idle connection opened first, as a browser opens spare ones ahead of need,
        # holds up no request (a server of one thread waited on it: the page never loaded).
        studies = {s["study_name"]: s["study_id"] for s in _get(base + "/api/studies")
                   ["study_summaries"]}
        assert set(studies) == {"nothing-yet", "all-failed"}
        for name, sid in studies.items():
            detail = _get(f"{base}/api/studies/{sid}?after=0")
            assert {g["id"] for g in detail["plotly_graph_objects"]} == set(FIGURE_IDS)
            assert "No measured trial yet." in detail["note"]["body"]
        assert len(_get(f"{base}/api/studies/{studies['all-failed']}?after=0")["trials"]) == 4
    log = (tmp_path / "dashboard.log").read_text()
    assert "at http://127.0.0.1:" in log and "/dashboard/ (Ctrl-C stops it)" in log


def test_publish_twice_overwrites_figures_and_keeps_user_notes(storage_url):
    make_study(storage_url, "mixed", n=8, name="again")
    opened = open_study("again", storage_url)
    said: list[str] = []
    publish(opened, said.append)
    assert "and 8 trial notes published" in said[-1]
    first = optuna_adapter.study_system_attrs(opened.study)
    trial = optuna_adapter.live_trial(opened.study, opened.study.trials[3])
    assert get_note(trial).startswith("### Trial 3: ")
    assert "Flags that differ from vLLM's defaults" in get_note(trial)
    save_note(trial, "my own words")  # as a user would in the dashboard
    publish(open_study("again", storage_url), said.append)
    assert "and 0 trial notes published" in said[-1]
    assert get_note(trial) == "my own words"
    second = optuna_adapter.study_system_attrs(opened.study)
    plots = sorted(k for k in second if k.startswith("dashboard:plot_data:"))
    assert plots == sorted(k for k in first if k.startswith("dashboard:plot_data:"))
    assert {k.split(":")[2] for k in plots} == set(FIGURE_IDS)
    assert opened.study.metric_names == ["output_throughput", "p99_itl_ms"]


def test_dashboard_usage_errors(storage_url, run_cli):
    make_study(storage_url, "empty", name="other")  # a storage that holds another study
    code, _, err = run_cli("dashboard", "nope", "--storage", storage_url, "--port", "1")
    assert code == 2 and "no study 'nope'" in err
    code, _, err = run_cli("dashboard", "--storage", storage_url, "--port", "70000")
    assert code == 2 and "--port 70000" in err


def test_the_dashboard_refuses_writes_and_foreign_hosts(storage_url, tmp_path, run_cli):
    """Seen case 2 of issue 47: on loopback, without credentials, the dashboard deleted a
    study (204) and rewrote a queued baseline's launch. Now it serves read-only, and only
    requests addressed to a loopback name (a rebound DNS name is refused)."""
    make_study(storage_url, "empty", name="kept")  # the baselines are queued
    study = optuna.load_study(study_name="kept", storage=storage_url)
    queued = study.get_trials(deepcopy=False)[0]
    launch = queued.user_attrs["launch"]
    with dashboard_process(storage_url, tmp_path / "dashboard.log") as base:
        sid = optuna_adapter.study_id(study)
        port = base.rsplit(":", 1)[1]
        assert _status(f"{base}/api/trials/{queued._trial_id}/user-attrs", "POST",
                       {"user_attrs": {"launch": {"gpu_memory_utilization": 5}}}) == 405
        assert _status(f"{base}/api/studies/{sid}/note", "PUT",
                       {"version": 1, "body": "x"}) == 405
        assert _status(f"{base}/api/studies/{sid}", "DELETE") == 405
        assert _status(f"{base}/api/studies", "POST",
                       {"study_name": "new", "directions": ["minimize"]}) == 405
        assert _status(f"{base}/api/studies/{sid}?after=0") == 200
        for name in ("localhost", "127.0.0.1", "[::1]"):
            assert _status(f"{base}/api/meta", host=f"{name}:{port}") == 200, name
        for name in (f"rebound.example:{port}", "rebound.example", f"127.0.0.1@x:{port}"):
            assert _status(f"{base}/api/meta", host=name) == 403, name
    assert [s.study_name for s in optuna.get_all_study_summaries(storage_url)] == ["kept"]
    assert study.get_trials(deepcopy=False)[0].user_attrs["launch"] == launch
    code, _, err = run_cli("dashboard", "--storage", storage_url, "--host", "0.0.0.0")
    assert code == 2 and "--host 0.0.0.0" in err and "--unsafe-remote" in err

"""`tuner dashboard` on a storage: it publishes tuner's figures and note on every tuner
study (also an empty one and one with only failed trials) and serves them over HTTP."""

from __future__ import annotations

import json
import urllib.request

from optuna_dashboard import get_note, save_note

from tuner import optuna_adapter
from tuner.results.dashboard import FIGURE_IDS, publish
from tuner.study import open_study
from tuner.testing.studies import dashboard_process, make_study


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_dashboard_serves_every_study_with_figures_and_note(storage_url, tmp_path):
    make_study(storage_url, "empty", name="nothing-yet")
    make_study(storage_url, "only-failed", n=4, name="all-failed")
    with dashboard_process(storage_url, tmp_path / "dashboard.log") as base:
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
    code, _, err = run_cli("dashboard", "nope", "--storage", storage_url, "--port", "1")
    assert code == 2 and "no study 'nope'" in err
    code, _, err = run_cli("dashboard", "--storage", storage_url, "--port", "70000")
    assert code == 2 and "--port 70000" in err

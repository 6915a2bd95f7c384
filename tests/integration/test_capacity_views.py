"""Every view of a capacity study shows capacity (issue 63, point 3), from real `tuner
pareto`, `tuner report` and `tuner status` processes on SQLite and PostgreSQL, and the
dashboard's notes: the capacity first with its interval, the levels it rests on and the
p99s at the reference rate; the saturated run's figures named as the warm-up's; the SLO
verdict from the capacity (never "met" beside a capacity of 0), the same in every view.

The study: ``make_capacity_study``'s three baselines plus ``add_judged_trials``' trial 3
(the most capacity, with an interval, resting on its levels at 8 and 10 req/s) and trial 4
(capacity 0: it misses p99 TTFT at its lowest level, with the lowest p99 ITL there, so no
trial dominates it)."""

from __future__ import annotations

import re

from tuner.results.capacity import capacity_label
from tuner.results.dashboard import note_markdown, trial_note
from tuner.results.summary import summarise
from tuner.testing.capacity_studies import REFERENCE_RATE, add_judged_trials, make_capacity_study
from tuner.testing.cli_fork import run_tuner
from tuner.trials import load_records


def _study(storage_url: str):
    make_capacity_study(storage_url)
    opened = add_judged_trials(storage_url)
    records = {r.number: r for r in load_records(opened.study)}
    assert records[3].metric("capacity_rps_lower") is not None  # an interval, stored
    assert records[4].metric("capacity_rps") == 0.0
    return opened, records


def _tuner(*args: str) -> str:
    done = run_tuner(args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_pareto_report_and_status_show_capacity_first(storage_url, tmp_path):
    opened, records = _study(storage_url)
    name, best = opened.spec.name, records[3]
    label = capacity_label(best)
    assert re.fullmatch(r"[\d.]+ \[[\d.]+-[\d.]+\]", label), label

    out = _tuner("pareto", name, "--storage", storage_url)
    table = out.split("\n\n")[1].splitlines()
    head = _cells(table[0])
    assert head[:5] == ["TRIAL", "CAPACITY REQ/S [95 %]", "ON LEVELS REQ/S",
                        f"P99 ITL MS AT {REFERENCE_RATE:g} REQ/S",
                        f"P99 TTFT MS AT {REFERENCE_RATE:g} REQ/S"], head
    # the saturated run's figures are there, under the warm-up's name only
    assert head[5:8] == ["WARM-UP TOK/S", "WARM-UP P99 ITL MS", "WARM-UP P99 TTFT MS"], head
    rows = {_cells(line)[0]: _cells(line) for line in table[1:]}
    assert rows["3"][1:5] == [label, "8 and 10", "40.0", "500"], rows["3"]
    assert rows["3"][head.index("SLOS")] == "met"
    # capacity 0: off the front (it meets no SLO at any level), never beside "met"
    assert "4" not in rows, rows
    assert "WARM-UP: the saturated run" in out

    page_path = tmp_path / "report.html"
    _tuner("report", name, "--storage", storage_url, "-o", str(page_path))
    page = page_path.read_text()
    best_part = page.split("<h2>Best flags</h2>")[1].split("<h2>Default baseline")[0]
    throughput, latency = best_part.split("<h3>Best for latency")
    assert "Best for throughput (by capacity_rps, within the SLOs): trial 3" in throughput
    assert "<th>capacity req/s [95 %]</th>" in throughput and f"<td class=n>{label}</td>" \
        in throughput
    assert "<th>warm-up p99 TTFT ms</th>" in throughput and "<th>tok/s</th>" not in page
    # the lowest p99 ITL at the reference rate within the SLOs: not trial 4 (capacity 0)
    assert "(by reference_p99_itl_ms, within the SLOs): trial 0" in latency, latency[:300]
    trials = page.split("<h2>All trials</h2>")[1]
    assert trials.index("<th>capacity req/s [95 %]</th>") < trials.index("<th>warm-up tok/s</th>")
    assert f"<td class=n>{capacity_label(records[4])}</td>" in trials

    status = _tuner("status", name, "--storage", storage_url, "--once")
    line = next(x for x in status.splitlines() if x.startswith("best:"))
    assert line.startswith(f"best: trial 3, capacity {label} req/s on levels 8 and 10; "
                           f"at {REFERENCE_RATE:g} req/s p99 ITL 40.0 ms, p99 TTFT 500 ms; "
                           "warm-up (saturated) "), line


def test_the_dashboards_notes_give_pareto_s_verdict(storage_url):
    opened, records = _study(storage_url)
    s = summarise(opened.spec, opened.space, list(records.values()))
    met = {r.record.number: r.slos_met for r in s.front}
    assert met == {n: True for n in met} and 4 not in met
    assert "SLOs: missed at every level of the load ladder (capacity 0)" in trial_note(
        s, records[4])
    for n in met:
        assert "SLOs: met" in trial_note(s, records[n])
    note = note_markdown(s)
    latency = note.split("### Best flags for latency (by reference_p99_itl_ms)\n")[1]
    assert latency.lstrip().startswith("Trial 0 (meets the SLOs)"), latency[:200]
    throughput = note.split("### Best flags for throughput")[1].split("###")[0]
    assert f"capacity {capacity_label(records[3])} req/s on levels 8 and 10" in throughput
    table = trial_note(s, records[3])
    assert table.index("| capacity req/s [95 %] |") < table.index("| warm-up tok/s |")

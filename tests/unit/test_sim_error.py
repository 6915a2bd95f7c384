"""The simulator-error table (bench/sim_error.py): rows, goals, and the report splice."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
_spec = importlib.util.spec_from_file_location("sim_error", ROOT / "bench/sim_error.py")
sim_error = sys.modules.setdefault("sim_error", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(sim_error)


def _row(tput_model: float, itl_model: float) -> "sim_error.Row":
    measured = {"output_throughput": 1000.0, "p99_itl_ms": 100.0, "median_ttft_ms": 500.0}
    model = {"output_throughput": tput_model, "p99_itl_ms": itl_model, "median_ttft_ms": 50.0}
    return sim_error.Row("set", 0, "vLLM defaults", measured, model)


def test_a_row_misses_a_goal_only_beyond_its_bound():
    assert _row(1099.0, 114.0).misses() == []  # +9.9 %, +14 %; TTFT is not judged
    assert _row(1101.0, 100.0).misses() == ["output_throughput"]
    assert _row(1000.0, 84.0).misses() == ["p99_itl_ms"]  # -16 %
    assert _row(math.nan, math.nan).misses() == ["output_throughput", "p99_itl_ms"]  # refused


def test_tally_counts_each_goal_and_both():
    lines = sim_error.tally([_row(1000.0, 100.0), _row(1200.0, 100.0), _row(1000.0, 200.0)])
    assert lines[0].startswith("- output_throughput within 10%: 2 of 3 (worst +20.0%")
    assert lines[1].startswith("- p99_itl_ms within 15%: 2 of 3 (worst +100.0%")
    assert lines[2] == "- both goals: 1 of 3 configurations"


def test_config_shows_only_what_differs_from_the_defaults():
    defaults = {"max_num_batched_tokens": None, "enforce_eager": False, "max_num_seqs": None}
    assert sim_error.short_config(dict(defaults), defaults, "default") == "vLLM defaults"
    flags = {**defaults, "max_num_batched_tokens": 512, "enforce_eager": True}
    assert sim_error.short_config(flags, defaults, "calib-b512-eager") == \
        "calib-b512-eager: budget=512 eager=on"


def test_splice_adds_the_section_once_and_then_replaces_only_the_table():
    report = "# Title\n\n## Old\n\nold text\n"
    first = sim_error.splice(report, "| a |")
    assert first.index(sim_error.ERROR_SECTION) < first.index("## Old")
    edited = first.replace(sim_error.BEGIN, "prose by hand\n\n" + sim_error.BEGIN)
    again = sim_error.splice(edited, "| b |")
    assert "| a |" not in again and "| b |" in again and "prose by hand" in again
    assert again.count(sim_error.ERROR_SECTION) == 1 and again.endswith("old text\n")


def test_calibration_report_keeps_the_error_section():
    calibrate = sys.modules["calibrate_sim"]
    old = sim_error.splice("# Title\n\nold report\n", "| a |")
    new = calibrate.keep_error_section(old, "# Title\n\nnew report\n")
    assert "| a |" in new and "old report" not in new and new.endswith("new report\n")
    assert calibrate.keep_error_section("# Title\n\nx\n", "# T\n\ny\n") == "# T\n\ny\n"


def test_the_calibration_set_is_read_whole():
    """The 12-01 calibration set: 10 measured configurations (trial 2 failed, 11-14 waited)."""
    from tuner.sim.profiles import engine_constants

    s = next(s for s in sim_error.SETS if s.label == "12-01 calib")
    rows = sim_error.rows_of(s, engine_constants())
    assert [r.trial for r in rows] == [0, 1, 3, 4, 5, 6, 7, 8, 9, 10]
    assert all(math.isfinite(r.model["output_throughput"]) for r in rows)
    assert rows[0].config == "vLLM defaults"


def test_the_refit_holds_out_configurations_that_were_measured():
    spec = importlib.util.spec_from_file_location("refit_sim", ROOT / "bench/refit_sim.py")
    refit = sys.modules.setdefault("refit_sim", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(refit)
    measured = {(i[0].label, i[1].trial) for i in refit.gather()}
    present = {(s.label) for s in sim_error.SETS if (ROOT / s.path).exists()}
    assert {h for h in refit.HELD_OUT if h[0] in present} <= measured
    fitted = measured - refit.HELD_OUT
    assert len(fitted) > 3 * len(refit.HELD_OUT & measured)


def test_round_2_is_simulated_as_long_as_each_trial_ran():
    """Round 2's study early-stopped or capped its runs (1,573-1,800 requests): each
    configuration is simulated for the requests its trial's first run completed."""
    s = next(s for s in sim_error.SETS if s.label == "12-01 round 2")
    trials = sim_error.load_trials(s)
    n = sim_error.sent(trials)
    assert n[1] == 1659 and n[5] == 1732 and n[3] == 1800
    assert sim_error.sent([{"number": 9, "metrics": None}]) == {9: None}
    assert sim_error.workload_of(s.study, n[1]).num_requests == 1659
    assert sim_error.workload_of(s.study).num_requests == 1000  # the study file's own
    from tuner.sim.profiles import engine_constants

    # trial 7 was interrupted (no figures) and ran again as trial 8
    assert [r.trial for r in sim_error.rows_of(s, engine_constants())] == \
        [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]

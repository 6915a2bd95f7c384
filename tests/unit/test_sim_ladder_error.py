"""The ladder-error benchmark's pure parts (bench/sim_ladder_error.py): relative errors,
capacity brackets at an SLO pair, figures from the simulator's trace, strict JSON."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sim_ladder_error",
                                               ROOT / "bench/sim_ladder_error.py")
mod = sys.modules.setdefault("sim_ladder_error", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(mod)

INF = math.inf


def _level(rate: float, itl: float, ttft: float, tput: float = 100.0,
           req_s: float = 1.0) -> "mod.Level":
    figures = {"p99_itl_ms": itl, "p99_ttft_ms": ttft, "median_itl_ms": itl / 3,
               "median_ttft_ms": ttft / 2, "output_throughput": tput,
               "request_throughput": req_s}
    return mod.Level(rate, 60, 1024, 128, 1.0, 100, figures)


def _ladder(*levels: "mod.Level", config: str = "default") -> "mod.Ladder":
    return mod.Ladder("h100", config, (), None, tuple(levels))


def test_relative_error_is_model_over_measured_minus_one_and_nan_without_a_measure():
    assert mod.rel_error(150.0, 100.0) == pytest.approx(0.5)
    assert mod.rel_error(80.0, 100.0) == pytest.approx(-0.2)
    assert math.isnan(mod.rel_error(1.0, 0.0))
    assert math.isnan(mod.rel_error(INF, 100.0))


def test_capacity_is_the_last_level_that_holds_before_the_first_miss():
    levels = [_level(9, 30, 90), _level(3, 20, 60), _level(21, 55, 150), _level(15, 33, 100)]
    held, missed = mod.capacity(levels, 50.0, 1000.0)  # order of the list does not matter
    assert (held.rate, missed.rate) == (15, 21)
    assert mod.bracket_text(held, missed) == "between 15 req/s and 21 req/s"
    held, missed = mod.capacity(levels, 25.0, 1000.0)
    assert (held.rate, missed.rate) == (3, 9)
    # the TTFT limit binds as well: 15 req/s holds the ITL limit but not a 95 ms TTFT
    held, missed = mod.capacity(levels, 50.0, 95.0)
    assert (held.rate, missed.rate) == (9, 15)


def test_a_level_above_a_miss_does_not_raise_the_capacity():
    levels = [_level(3, 20, 60), _level(9, 60, 90), _level(15, 30, 100)]
    assert [lv.rate for lv in mod.capacity(levels, 50.0, 1000.0)] == [3, 9]


def test_capacity_brackets_at_the_ends_and_the_saturated_level_shows_what_it_achieved():
    sat = _level(INF, 200, 16000, req_s=27.4)
    assert mod.bracket_text(*mod.capacity([_level(3, 30, 60), sat], 25.0, 1000.0)) == \
        "below 3 req/s"
    assert mod.bracket_text(*mod.capacity([_level(3, 20, 60), sat], 25.0, 1000.0)) == \
        "between 3 req/s and saturated (27.4 req/s)"
    assert mod.bracket_text(*mod.capacity([_level(3, 20, 60)], 25.0, 1000.0)) == \
        "at least 3 req/s"


def test_level_rows_and_capacity_rows_compare_real_with_simulated():
    real = _ladder(_level(3, 20, 60, tput=400), _level(9, 30, 90), _level(INF, 200, 9000))
    sim = _ladder(_level(3, 30, 60, tput=300), _level(9, 40, 90), _level(INF, 250, 9000))
    rows = mod.level_rows(real, sim)
    assert rows[0]["p99_itl_ms"] == {"real": 20, "sim": 30, "error": pytest.approx(0.5)}
    assert rows[0]["output_throughput"]["error"] == pytest.approx(-0.25)
    caps = mod.capacity_rows(real, sim)
    assert [c["same_bracket"] for c in caps] == [False, True]  # 25 ms: 3-9 vs below 3
    assert caps[0]["sim"] == "below 3 req/s"
    text = mod.render([{"gpu": "h100", "config": "default", "flags": [], "role": "held out",
                        "levels": rows, "capacity": caps,
                        "checks": [{"client": {"p99_itl_ms": 1.0, "p99_ttft_ms": 2.0},
                                    "late_steps": 0.0, "max_late_ms": 0.0, "valid": True,
                                    "invalid_reason": None}] * 3}], "python x", 1.0)
    assert text.splitlines()[2] == "    python x"
    assert "| 3 req/s | 60 | 20.0 / 30.0 (+50%) |" in text
    assert "| p99 ITL <= 25 ms, p99 TTFT <= 1 s | between 3 req/s and 9 req/s | " \
           "below 3 req/s | **no** |" in text


def test_trace_figures_are_in_simulated_time():
    # two requests submitted at 0, tokens due at wall times; the server ran 2x fast
    trace = [{"submitted": 0.0, "due": [0.010, 0.015, 0.020]},
             {"submitted": 1.0, "due": [1.030, 1.035]}]
    f = mod.trace_figures(trace, 2.0)
    assert f["median_itl_ms"] == pytest.approx(10.0)  # 5 ms of wall time, x2
    assert f["median_ttft_ms"] == pytest.approx(40.0)  # (10 + 30) / 2 x2
    assert f["p99_ttft_ms"] == pytest.approx(2 * (10 + 0.99 * 20))


def test_lateness_counts_only_the_steps_of_the_level():
    steps = [[1.0, 0.200, 8, 0.0, 0.01], [5.0, 0.003, 8, 0.0, 0.01], [6.0, 0.020, 8, 0.0, 0.01]]
    assert mod.max_lateness_ms(steps, 4.0) == pytest.approx(20.0)
    assert mod.max_lateness_ms(steps, 7.0) == 0.0


def test_json_is_strict():
    text = json.dumps(mod.json_safe({"rate": INF, "errors": [math.nan, 0.5]}))
    assert json.loads(text) == {"rate": "inf", "errors": [None, 0.5]}


def test_only_listed_ladders_are_fitted(monkeypatch):
    monkeypatch.setattr(mod, "FITTED", frozenset({("h100", "chunked-512")}))
    assert _ladder(config="chunked-512").fitted
    assert not _ladder(config="default").fitted

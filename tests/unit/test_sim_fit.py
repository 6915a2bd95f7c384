"""The leave-one-ladder-out fit (bench/sim_fit.py): no fold reads the ladder it holds out,
the proposed table is what profiles.toml then reads, and the summary counts the targets."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import sim_fit  # noqa: E402

from tuner.sim import profiles  # noqa: E402
from tuner.sim.profiles import PROFILES_FILE, engine_constants  # noqa: E402


def test_each_fold_fits_on_every_ladder_but_the_one_it_holds_out(monkeypatch):
    seen = []

    def fake_fit(loaded):
        seen.append({c for _, c, _, _ in loaded})
        return {"step_overhead_ms": float(len(seen))}

    monkeypatch.setattr(sim_fit, "fit", fake_fit)
    loaded = [("h100", c, [], []) for c in ("a", "b", "c")]
    folds, proposed = sim_fit.leave_one_out(loaded, processes=1)
    assert seen == [{"b", "c"}, {"a", "c"}, {"a", "b"}, {"a", "b", "c"}]
    assert folds == {"a": {"step_overhead_ms": 1.0}, "b": {"step_overhead_ms": 2.0},
                     "c": {"step_overhead_ms": 3.0}}
    assert proposed == {"step_overhead_ms": 4.0}


def test_a_fit_sees_only_the_levels_below_saturation(monkeypatch):
    levels = []
    monkeypatch.setattr(sim_fit, "PARAMS", {"step_overhead_ms": (0.0, 5.0)})

    def fake_residuals(values, loaded):
        levels.extend(rate for _, _, _, rungs in loaded for rate, _, _ in rungs)
        return [values["step_overhead_ms"] - 2.0]

    monkeypatch.setattr(sim_fit, "residuals", fake_residuals)
    got = sim_fit.fit([("h100", "a", [], [(3.0, {}, {}), (math.inf, {}, {})])])
    assert got["step_overhead_ms"] == pytest.approx(2.0, abs=1e-3)
    assert set(levels) == {3.0}


def test_the_proposed_table_is_what_profiles_toml_then_reads(tmp_path):
    path = tmp_path / "profiles.toml"
    base = PROFILES_FILE.read_text().split("\n[engine_by_gpu.")[0].rstrip("\n") + "\n"
    path.write_text(base)
    values = {"step_overhead_ms": 0.8125, "front_end_ms": 11.5}
    sim_fit.write_profile(sim_fit.profile_toml("h100", values, ["default"]), "h100", path)
    assert engine_constants("h100", path=path).front_end_ms == 11.5
    again = {"step_overhead_ms": 0.5, "front_end_ms": 9.0}
    sim_fit.write_profile(sim_fit.profile_toml("h100", again, ["default"]), "h100", path)
    profiles._load.cache_clear()  # a process reads profiles.toml once; this one wrote it twice
    text = path.read_text()
    assert text.count("[engine_by_gpu.h100]") == 1 and text.startswith(base)
    assert engine_constants("h100", path=path).step_overhead_ms == 0.5
    assert engine_constants("h200", path=path) == engine_constants(path=path)


def level(rate, **errors):
    return {"rate": rate, "error": {**dict.fromkeys(sim_fit.TARGETS, 0.0), **errors}}


def test_the_summary_counts_levels_within_each_target_and_agreeing_brackets():
    entries = [{"levels": [level(3, median_itl_ms=0.05, p99_itl_ms=-0.3),
                           level(9, median_itl_ms=-0.12),
                           level(math.inf, median_itl_ms=0.9)],  # saturated: not counted
                "capacity": [{"real": "3-9", "model": "3-9"},
                             {"real": "9-15", "model": "below 3"}]}]
    s = sim_fit.summary(entries)
    assert s["median_itl_ms"] == {"median_abs": pytest.approx(0.085), "min": -0.12,
                                  "max": 0.05, "within": 1, "levels": 2}
    assert s["p99_itl_ms"]["within"] == 1
    assert s["brackets"] == {"same": 1, "cases": 2}


def test_fewer_than_two_ladders_is_a_usage_error(capsys):
    assert sim_fit.main(["--gpu", "h999"]) == 2
    assert "leaving one out needs two" in capsys.readouterr().err

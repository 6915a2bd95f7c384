"""profiles.toml's per-GPU engine constants: a GPU's fitted table replaces ``[engine]``'s
values for that GPU only, and every caller that names a GPU gets them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.sim.openloop import engine_core
from tuner.sim.profiles import PROFILES_FILE, engine_constants, sources


def profiles_with(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(PROFILES_FILE.read_text().split("\n[engine_by_gpu.")[0] + "\n" + table)
    return path


def test_a_gpus_table_replaces_the_engine_constants_for_that_gpu_only(tmp_path):
    path = profiles_with(tmp_path, "[engine_by_gpu.h100]\n"
                         'step_overhead_ms = { value = 0.25, source = "a test" }\n'
                         'front_end_ms = { value = 12.0, source = "a test" }\n')
    base = engine_constants(path=path)
    h100 = engine_constants("h100", path=path)
    assert (h100.step_overhead_ms, h100.front_end_ms) == (0.25, 12.0)
    assert engine_constants("h200", path=path) == base
    assert base.front_end_ms == 0.0  # no delay unless a profile has one
    assert h100.bandwidth_efficiency == base.bandwidth_efficiency
    assert sources(path)["engine_by_gpu.h100"]["front_end_ms"] == "a test"


def test_a_constant_the_engine_lacks_is_refused(tmp_path):
    path = profiles_with(tmp_path, "[engine_by_gpu.h100]\n"
                         'no_such_constant = { value = 1.0, source = "a test" }\n')
    with pytest.raises(TypeError, match="no_such_constant"):
        engine_constants("h100", path=path)


def test_the_engine_core_of_a_gpu_takes_its_fitted_constants():
    for gpu in ("h100", "h200"):
        core = engine_core({}, gpu)
        assert core.front_end_s == pytest.approx(engine_constants(gpu).front_end_ms / 1e3)
        assert core.coef.overhead_s == pytest.approx(engine_constants(gpu).step_overhead_ms / 1e3)

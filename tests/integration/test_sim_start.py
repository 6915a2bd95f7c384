"""`python -m tuner.sim serve` starts as vLLM does: its log shows the modelled phases, a
compile key seen on the same cache hits, and ``--sim-start-delay`` waits them out."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tuner.engine.startlog import start_phases
from tuner.testing.sim_server import sim_server

pytestmark = pytest.mark.integration


def started(folder: Path, *flags: str, time_scale: float = 1.0) -> tuple[dict, float]:
    """The start phases that a simulated server's log shows, and seconds until healthy."""
    folder.mkdir()
    t0 = time.monotonic()
    with sim_server(folder, "--gpu", "h100", *flags, time_scale=time_scale):
        ready_s = time.monotonic() - t0
    (log,) = folder.glob("sim-*.log")
    return start_phases(log.read_text()), ready_s


def test_a_second_start_of_a_key_hits_the_compile_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "cache"))
    budget = ("--max-num-batched-tokens", "2048")
    first, _ = started(tmp_path / "first", *budget)
    second, _ = started(tmp_path / "second", *budget)
    other, _ = started(tmp_path / "other", "--max-num-batched-tokens", "1024")
    assert (first["compile_cache"], second["compile_cache"], other["compile_cache"]) == (
        "miss", "hit", "miss")
    assert second["compile"] < first["compile"] and second["warmup"] < first["warmup"]
    assert second["logged"] < first["logged"]
    assert (first["compile_range"], other["compile_range"]) == ("1-2048", "1-1024")
    assert len(list((tmp_path / "cache" / "torch_compile_cache").iterdir())) == 2


def test_without_a_cache_root_every_compiled_start_misses(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    runs = [started(tmp_path / name)[0]["compile_cache"] for name in ("a", "b")]
    assert runs == ["miss", "miss"]


def test_eager_shows_no_compile_and_no_capture(tmp_path):
    phases, _ = started(tmp_path / "eager", "--enforce-eager")
    assert "compile" not in phases and "graph_capture" not in phases
    assert phases["init_engine"] > 0


def test_start_delay_waits_the_modelled_start_out(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "cache"))
    scale = 50.0
    phases, ready_s = started(tmp_path / "delayed", "--sim-start-delay", time_scale=scale)
    assert ready_s >= phases["logged"] / scale

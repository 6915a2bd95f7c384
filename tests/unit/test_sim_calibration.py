"""The calibrated simulator against the real H200 trials (results/h200/trials.json).

The goals of the calibration (issue 10): on every measured configuration, the KV-cache size
within 2 % and output throughput and p99 ITL within 20 %. The constants come from
tuner/sim/profiles.toml, as fitted by bench/calibrate_sim.py; these tests only read them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from tuner.sim.profiles import engine_constants, sources

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("calibrate_sim", ROOT / "bench/calibrate_sim.py")
calibrate = sys.modules.setdefault("calibrate_sim", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(calibrate)


@pytest.fixture(scope="module")
def points():
    return calibrate.measured_points(json.loads(calibrate.TRIALS.read_text()))


@pytest.fixture(scope="module")
def modelled(points):
    return calibrate.simulate(points, engine_constants())


def test_the_measured_configurations_are_the_distinct_measured_trials(points):
    # 4 duplicates 3; 5 was lost to an interrupt (6 re-ran it); 9 was killed mid-run
    assert [p.trial for p in points] == [0, 1, 2, 3, 6, 7, 8]
    assert set(calibrate.FIT_TRIALS) < {p.trial for p in points}  # the rest are held out
    # flags as the command line passed them: trial 2 gave no --max-num-seqs, so vLLM (and
    # the model) took min(1024, budget) = 256
    assert points[2].flags["max_num_batched_tokens"] == 256
    assert points[2].flags["max_num_seqs"] is None
    assert points[3].flags["kv_cache_dtype"] == "fp8" and points[3].flags["block_size"] == 32


@pytest.mark.parametrize("metric", sorted(calibrate.GOALS))
def test_calibrated_model_meets_the_goal_on_every_measured_configuration(points, modelled, metric):
    """Every goal on every point, but for the one documented gap: the KV-cache size at vLLM's
    defaults (trial 0), held to 2.5 % (results/h200/simulator-error.md says why)."""
    for p, v in zip(points, modelled):
        goal = calibrate.KNOWN_GAPS.get((p.trial, metric), calibrate.GOALS[metric])
        err = calibrate.rel_error(v[metric], p.measured[metric])
        assert math.isfinite(err) and abs(err) <= goal, \
            f"trial {p.trial}: {metric} model {v[metric]:.1f}, measured {p.measured[metric]:.1f}"


def test_every_measured_configuration_meets_every_goal(points, modelled):
    assert calibrate.within_goals(points, modelled) == []
    assert calibrate.KNOWN_GAPS == {}


def test_kv_cache_of_the_held_out_trial_5():
    """Trial 5 (eager, fp8, utilisation 0.76) was not used by the fit: its log's KV-cache
    size is a prediction check."""
    line = calibrate.held_out_checks(engine_constants())[0]
    err = float(line.rsplit("(", 1)[1].rstrip(").%")) / 100
    assert abs(err) <= 0.02, line


def test_chunked_prefill_off_mixes_decodes_into_every_step(points, modelled):
    """vLLM 0.24 (V1) with chunked prefill off: trial 1's median ITL is a decode step carrying
    whole prompts (80.8 ms), not a bare decode step (~20 ms) as in vLLM V0."""
    assert engine_constants().unchunked_mixes_decodes
    assert modelled[1]["median_itl_ms"] == pytest.approx(points[1].measured["median_itl_ms"], rel=0.2)


def test_calibrated_constants_name_their_measurement():
    engine = sources()["engine"]
    for key in (*calibrate.SPEED_KEYS, "unchunked_mixes_decodes"):
        assert "measured on H200, results/h200/" in engine[key] and "2026-11-29" in engine[key], key


def test_goal_check_reports_each_miss(points):
    far = [{**p.measured, "output_throughput": p.measured["output_throughput"] * 1.5}
           for p in points]
    missed = calibrate.within_goals(points, far)
    assert len(missed) == len(points) and all("output_throughput" in m for m in missed)
    assert calibrate.within_goals(points, [p.measured for p in points]) == []


def test_flags_from_a_recorded_command_line():
    cmd = ["/opt/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m",
           "--no-enable-chunked-prefill", "--enforce-eager", "--gpu-memory-utilization", "0.95",
           "--max-model-len", "2048", "--kv-cache-dtype", "fp8"]
    flags = calibrate.flags_from_command(cmd)
    assert flags["enable_chunked_prefill"] is False and flags["enforce_eager"] is True
    assert flags["gpu_memory_utilization"] == 0.95 and flags["max_model_len"] == 2048
    assert flags["kv_cache_dtype"] == "fp8" and flags["max_num_batched_tokens"] is None

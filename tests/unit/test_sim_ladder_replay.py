"""The offline ladder replay: its capacity brackets, and a run on the committed H100
ladders that reproduces their real figures from the per-request files."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import sim_ladder_replay as replay  # noqa: E402


def level(rate: float, real: tuple[float, float]) -> dict:
    return {"rate": rate, "real": {"p99_itl_ms": real[0], "p99_ttft_ms": real[1]}}


def test_the_bracket_is_the_last_holding_rate_below_the_first_miss():
    levels = [level(3, (20, 60)), level(9, (30, 90)), level(15, (60, 100)), level(21, (20, 90))]
    assert replay.bracket(levels, "real", 50, 1000) == "9-15"
    assert replay.bracket(levels, "real", 10, 1000) == "below 3"
    assert replay.bracket(levels, "real", 100, 1000) == "at least 21"
    assert replay.bracket(levels, "real", 100, 80) == "3-9"


def test_a_run_reads_the_real_figures_vllm_reported_and_models_every_level(tmp_path):
    out = tmp_path / "replay"
    assert replay.main(["--gpus", "h100", "--out", str(out)]) == 0
    entries = json.loads(out.with_suffix(".json").read_text())
    default = next(e for e in entries if e["config"] == "default")
    summary = json.loads((ROOT / "results/h100/rate-ladders/default-summary.json").read_text())
    reported = {(math.inf if e["request_rate"] == "inf" else e["request_rate"]): e
                for e in summary["levels"] if "warmup" not in e["file"]}
    assert [lv["rate"] for lv in default["levels"]] == [3, 9, 15, 21, math.inf]
    for lv in default["levels"]:
        for key in ("p99_itl_ms", "median_ttft_ms", "output_throughput"):
            assert abs(lv["real"][key] / reported[lv["rate"]][key] - 1) < 0.01
        assert all(math.isfinite(v) and v > 0 for v in lv["model"].values())
    assert "| 3 | 60 |" in out.with_suffix(".md").read_text()


def test_a_constant_the_engine_lacks_is_refused(capsys):
    assert replay.main(["--set", "no_such_constant=1"]) == 2
    assert "engine constant" in capsys.readouterr().err

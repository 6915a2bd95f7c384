"""bench/ladder.py's grid band: where the truth's own long runs disagree, so that a ladder's
error can be read against what the truth can tell."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from ladder import grid_band  # noqa: E402


def run(held: bool, valid: bool = True) -> dict:
    return {"held": held, "valid": valid}


def test_a_failed_run_below_a_held_one_spans_the_band():
    grid = {"1.0": run(True), "2.0": run(False), "2.5": run(True), "3.0": run(False)}
    assert grid_band(grid) == (2.0, 2.5)


def test_a_monotone_grid_has_no_band_and_invalid_runs_do_not_count():
    assert grid_band({"1.0": run(True), "2.0": run(True), "3.0": run(False)}) is None
    assert grid_band({"1.0": run(True), "2.0": run(False, valid=False),
                      "3.0": run(True), "4.0": run(False)}) is None
    assert grid_band({"1.0": run(True)}) is None

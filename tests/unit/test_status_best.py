"""`tuner status`'s best line on a capacity study: the most capacity within the SLOs,
which the ladder already applied; the saturated run's p99s are no limit."""

from __future__ import annotations

from pathlib import Path

from tuner.service.status import _best
from tuner.storage import load_study_file
from tuner.trials import record
from tuner.trials.record import TrialRecord

ROOT = Path(__file__).resolve().parents[2]


def _measured(number: int, capacity: float, baseline: str | None = None) -> TrialRecord:
    # saturated p99s far beyond the study's SLOs (p99 ITL <= 50 ms, p99 TTFT <= 1 s)
    metrics = {"capacity_rps": capacity, "reference_p99_itl_ms": 30.0, "p99_itl_ms": 300.0,
               "p99_ttft_ms": 9000.0, "output_throughput": 3000.0, "completed": 100.0}
    return TrialRecord(number=number, state=record.COMPLETE, outcome=record.MEASURED,
                       values=(capacity, 30.0), metrics=metrics, baseline=baseline,
                       flags={"max_num_seqs": 64 * (number + 1)})


def test_a_capacity_studys_best_is_the_most_capacity_whatever_the_saturated_p99s():
    spec = load_study_file(ROOT / "studies/capacity-sim.toml")
    assert spec.measures_capacity
    best = _best(spec, [_measured(0, 5.0, "default"), _measured(1, 7.5), _measured(2, 6.0)])
    assert best is not None and (best.trial, best.metric, best.value) == (1, "capacity_rps", 7.5)
    assert best.gains["capacity_rps"] == 50.0   # against the default's 5 req/s

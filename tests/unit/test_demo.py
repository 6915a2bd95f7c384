"""`make demo` shows the headline: it runs a capacity study on the simulated engine, and on
a busy machine the demo slows the simulator's clock rather than starve its client
(tuner.cli.demo, issue 63)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuner.storage import load_study_file

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def _make_demo_study() -> str:
    (target,) = re.findall(r"(?m)^demo:.*\n\t.*tuner demo (\S+)", (ROOT / "Makefile").read_text())
    return target


def test_make_demo_runs_a_capacity_study_on_the_simulator():
    spec = load_study_file(ROOT / _make_demo_study())
    assert spec.measures_capacity and spec.engine.kind == "sim"
    assert [o.metric for o in spec.objectives][0] == "capacity_rps"
    assert spec.slo.p99_ttft_ms and spec.slo.p99_itl_ms and spec.capacity.reference_rate


def test_the_demo_module_names_the_makefiles_study():
    from tuner.cli.demo import MAKE_DEMO

    assert MAKE_DEMO == _make_demo_study()


@pytest.mark.parametrize("cores, load, scale", [
    (2, 0.0, 2.0),     # quiet: the study file's scale
    (16, 3.0, 2.0),    # busy but with cores to spare
    (2, 0.5, 1.5),
    (2, 1.0, 1.0),     # one busy loop on two cores: half the cores a trial needs
    (2, 6.0, 1.0),     # never slower than half the file's scale
])
def test_a_busy_machine_slows_the_simulators_clock(cores, load, scale):
    from tuner.cli.demo import paced_time_scale

    assert paced_time_scale(2.0, cores, load) == scale


def test_a_slower_clock_allows_as_much_more_client_lag_in_wall_time():
    from tuner.cli.demo import paced_spec

    spec = load_study_file(ROOT / "studies/capacity-sim.toml")
    assert paced_spec(spec, spec.engine.time_scale) == spec
    slow = paced_spec(spec, spec.engine.time_scale / 4)
    assert slow.engine.time_scale == spec.engine.time_scale / 4
    # the same bound in simulated time: 4 times the wall-clock lag
    assert slow.workload.max_client_lag_ms == 4 * spec.workload.max_client_lag_ms
    assert slow.workload.model_dump(exclude={"max_client_lag_ms"}) == spec.workload.model_dump(
        exclude={"max_client_lag_ms"})


# Two readings of /proc/stat one second apart (ticks of 10 ms: user nice system idle iowait
# irq softirq steal guest guest_nice): cpu0 ran a busy loop, cpu1 idled, cpu2 is not ours.
STAT_BEFORE = """cpu  300 0 0 900 0 0 0 0 0 0
cpu0 100 0 0 500 0 0 0 0 0 0
cpu1 100 0 0 400 0 0 0 0 0 0
cpu2 100 0 0 0 0 0 0 0 0 0
intr 5 0 0
"""
STAT_AFTER = """cpu  500 0 0 1000 0 0 0 0 0 0
cpu0 198 0 2 500 0 0 0 0 0 0
cpu1 100 0 0 495 5 0 0 0 0 0
cpu2 200 0 0 0 0 0 0 0 0 0
intr 9 0 0
"""


def test_a_busy_loop_that_just_started_counts_as_a_busy_core():
    from tuner.cli.demo import busy_cores, paced_time_scale

    busy = busy_cores(STAT_BEFORE, STAT_AFTER, {0, 1})
    assert busy == pytest.approx(1.0)  # cpu0 all busy, cpu1 idle (iowait is idle)
    assert busy_cores(STAT_BEFORE, STAT_AFTER, {1}) == 0.0
    assert busy_cores(STAT_BEFORE, STAT_BEFORE, {0, 1}) == 0.0  # no time passed
    # a quiet load average (the loop started a second ago) no longer gives the file's 2x
    assert paced_time_scale(2.0, 2, max(0.05, busy)) == 1.0

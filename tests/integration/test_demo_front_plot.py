"""`tuner demo` ends with the front as a terminal plot (tuner.cli.demo._front_plot) read from
the stored study (a fake-measured study on SQLite)."""

import pytest

from tuner.cli.demo import _front_plot
from tuner.testing.studies import make_study
from tuner.trials.pareto import pareto_front
from tuner.trials.queries import load_records

pytestmark = pytest.mark.integration


def test_the_demo_prints_every_front_point_and_the_latency_span(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    opened = make_study(url, "mixed", n=12, seed=1)
    front = pareto_front(load_records(opened.study), opened.spec.objectives)
    text = _front_plot(opened.spec.name, url)
    assert f"The front: {len(front)} points" in text
    assert front and 1 <= text.count("*") <= len(front)  # points may share a cell
    assert "p99 ITL ms" in text and "tok/s" in text

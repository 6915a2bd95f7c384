"""Seen in issue 63 (item 5): a trial's progress line cut its failure at 120 characters,
so the advice at its end read "... at 24% client CPU (use less l". The line now gives the
whole message, on one line."""

from io import StringIO

from tuner.loadgen.lag import judge
from tuner.runner.progress import Progress, told_summary
from tuner.trials import record
from tuner.trials.parts import Failure, FailureKind
from tuner.trials.record import TrialRecord


def _line(told: TrialRecord) -> str:
    out = StringIO()
    progress = Progress(16, out)
    progress.begin(3, spent=3)
    progress.end(told.outcome, told_summary(told), "best: -")
    return out.getvalue()


def test_a_starved_clients_advice_is_printed_whole():
    why = judge({"loop_lag_p99_ms": 180.0, "cpu_util_max": 0.24}, 50)
    assert why is not None and len(why) > 120  # what the cut used to shorten
    line = _line(record.failed(Failure(kind=FailureKind.INVALID_MEASUREMENT, message=why),
                               TrialRecord()))
    assert line.startswith("[3/16] trial 3: failed invalid-measurement: ")
    assert why in line and line.count("\n") == 1, line


def test_a_message_of_several_lines_stays_one_line():
    told = record.failed(Failure(kind=FailureKind.ERROR, message="OSError: gone\n  at x"),
                         TrialRecord())
    line = _line(told)
    assert "OSError: gone at x" in line and line.count("\n") == 1, line

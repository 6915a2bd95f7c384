"""One live line per trial (n of N, phase, elapsed, best so far) and a summary at the end.

n of N counts the study's trials (those that spend its budget, this one included) against
its budget, when the worker says so (``begin(trial, spent)``): a resumed worker, or one of
several, shows where the study stands, not how many trials this worker ran."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tuner.trials import record
from tuner.trials.capacity_view import capacity_line
from tuner.trials.parts import Failure
from tuner.trials.record import TrialRecord


class Progress:
    """Writes to stderr; rewrites the line in place on a terminal, one line per phase elsewhere."""

    def __init__(self, total: int | None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.total = total
        self.index = 0
        self.trial: int | None = None
        self.phase = ""
        self.since = time.monotonic()
        self.best = ""

    def begin(self, trial: int, spent: int | None = None) -> None:
        self.index = self.index + 1 if spent is None else spent
        self.trial, self.since = trial, time.monotonic()

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._write(final=False)

    def end(self, outcome: str, summary: str, best: str) -> None:
        self.phase, self.best = f"{outcome} {summary}".strip(), best
        self._write(final=True)

    def _line(self) -> str:
        of = f"/{self.total}" if self.total else ""
        elapsed = time.monotonic() - self.since
        return (f"[{self.index}{of}] trial {self.trial}: {self.phase} "
                f"({elapsed:5.1f} s)  {self.best}")

    def _write(self, final: bool) -> None:
        if self.tty:
            end = "\n" if final else ""
            self.stream.write("\r\033[K" + self._line() + end)
        elif final or self.phase:
            self.stream.write(self._line() + "\n")
        self.stream.flush()

    def say(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()


def told_summary(told: TrialRecord, reference_rate: float | None = None) -> str:
    """What a finished trial's line says of it: a load ladder's capacity first
    (``capacity_view.capacity_line``), else the saturated run's figures, or its failure's
    kind and its whole message on one line. Seen: a message cut at 120 characters ended
    its advice mid-word ("... at 24% client CPU (use less l"), and the advice is the part
    to act on."""
    m = told.metrics
    if told.outcome in (record.MEASURED, record.DUPLICATE) and "capacity_rps" in m:
        return capacity_line(told, reference_rate)
    if told.outcome in (record.MEASURED, record.DUPLICATE) and m:
        return (f"{m.get('output_throughput', 0):,.0f} tok/s, p99 ITL "
                f"{m.get('p99_itl_ms', 0):,.1f} ms")
    failure = told.failure or Failure()
    return f"{failure.kind or ''}: {' '.join(str(failure.message or '').split())}"

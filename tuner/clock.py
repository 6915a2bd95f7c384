"""The clock the trial loop reads and sleeps on: the system's, or a test's scripted one
(``tuner.testing.clock``).

``Clock`` is the seam: a worker that is given one reads every duration, deadline and
pause from it, so that a test can move time on by hand instead of waiting for it.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """What the trial loop asks of time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations, timeouts)."""

    def time(self) -> float:
        """Seconds since the epoch (deadlines shared with other hosts)."""

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass."""


class SystemClock:
    """The real clock: ``time.monotonic``, ``time.time``, ``time.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM = SystemClock()

"""A scripted clock for the in-process tier (``tuner.clock.Clock``): time moves only when
the test (or a sleep) moves it, so nothing a test asserts depends on how busy the host is.
"""

from __future__ import annotations


class FakeClock:
    """Starts at ``start`` (epoch seconds; its monotonic reading starts at 0). ``sleep``
    and ``advance`` move both readings on at once; nothing else does."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._epoch, self._mono = start, 0.0
        self.slept: list[float] = []  # every sleep asked for, in order

    def monotonic(self) -> float:
        return self._mono

    def time(self) -> float:
        return self._epoch

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` (not negative) pass."""
        if seconds < 0:
            raise ValueError("a clock never goes back")
        self._epoch += seconds
        self._mono += seconds

"""Holding Ctrl-C and SIGTERM for a moment: while a measured trial's server stops and the
trial is recorded, an interrupt must not throw the measurement away."""

from __future__ import annotations

import signal
import threading


class deferred_interrupts:  # noqa: N801 - used as a context manager, like a function
    """Within the block SIGINT/SIGTERM are noted, not raised; ``pending`` lists them.

    On a thread other than the main one (where signals cannot be handled) it does nothing.
    """

    def __enter__(self) -> "deferred_interrupts":
        self.pending: list[int] = []
        self.saved = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, lambda n, f: self.pending.append(n))
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)

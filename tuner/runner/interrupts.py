"""Ctrl-C, SIGTERM and SIGHUP in a worker (``INTERRUPTS``, all three alike): held for a
moment while a measured trial's server stops and the trial is recorded (an interrupt must
not throw the measurement away), and turned into a cancellation while an event loop runs
(``run_interruptible``)."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# The signals that stop a worker cleanly. SIGHUP too: a worker whose terminal or ssh
# session closes was killed by it, its trial left RUNNING and its server's children behind.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interrupts() -> tuple[int, ...]:
    """The ``INTERRUPTS`` to catch now: all but an ignored SIGHUP (a worker started under
    ``nohup`` is meant to outlive its terminal, and still does)."""
    return tuple(s for s in INTERRUPTS
                 if s != signal.SIGHUP or signal.getsignal(s) is not signal.SIG_IGN)


class deferred_interrupts:  # noqa: N801 - used as a context manager, like a function
    """Within the block the ``INTERRUPTS`` are noted, not raised; ``pending`` lists them.

    On a thread other than the main one (where signals cannot be handled) it does nothing.
    """

    def __enter__(self) -> "deferred_interrupts":
        self.pending: list[int] = []
        self.saved = {}
        if threading.current_thread() is threading.main_thread():
            for sig in interrupts():
                self.saved[sig] = signal.signal(sig, lambda n, f: self.pending.append(n))
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def run_interruptible(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, where Ctrl-C, SIGTERM or SIGHUP cancels ``main`` and is raised
    as KeyboardInterrupt once the loop has closed.

    A KeyboardInterrupt raised by a signal handler lands wherever the interpreter is, and
    inside asyncio's own code (a future waking its task) it left a task never woken, so
    that ``asyncio.run`` waited for it for ever while closing the loop; raised inside a
    callback it was printed and dropped, and the benchmark ran on to its end. Here the first
    signal only cancels the task (from the loop); a second one raises at once, for a run
    that does not end: the loop's tasks are then cancelled as it closes, and a third signal
    raises from there too. Then the handler that was in place before is called with the
    first signal (the worker's notes it and raises); a signal that was ignored stays
    ignored.
    On a thread other than the main one this is ``asyncio.run``.
    """
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    caught: list[int] = []
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        task = loop.create_task(main)

        def on_signal(signum, frame) -> None:
            if caught:
                raise KeyboardInterrupt
            caught.append(signum)
            loop.call_soon_threadsafe(task.cancel)

        saved = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
        try:
            for sig, before in saved.items():
                if before is not signal.SIG_IGN:
                    signal.signal(sig, on_signal)
            try:
                result = loop.run_until_complete(task)
            except BaseException:  # what ends a cancelled run: the interrupt wins
                if not caught:
                    raise
            finally:
                runner.close()  # the other tasks end too, while a signal still only cancels
        finally:
            for sig, before in saved.items():
                signal.signal(sig, before)
    if caught:
        before = saved[caught[0]]
        if callable(before):
            before(caught[0], None)
        elif before == signal.SIG_DFL:
            signal.raise_signal(caught[0])
        raise KeyboardInterrupt
    return result

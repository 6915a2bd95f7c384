"""tuner.runner.interrupts.run_interruptible: Ctrl-C and SIGTERM during a benchmark's event
loop cancel it and are raised once the loop has closed, through the handler in place."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tuner.runner.interrupts import run_interruptible

pytestmark = pytest.mark.unit


@pytest.fixture
def handlers():
    """The handlers of SIGINT and SIGTERM as the test found them, restored after it."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _noting(events):
    def handler(signum, frame):  # as the worker's: note, then raise
        events.append(f"handler {signal.Signals(signum).name}")
        raise KeyboardInterrupt
    return handler


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_asyncio_s_own_callbacks_cancels_the_run_and_is_raised_after_it(
        handlers, sig):
    events: list[str] = []
    handler = _noting(events)
    signal.signal(sig, handler)

    async def benchmark():
        fut = asyncio.get_running_loop().create_future()
        # the signal arrives while asyncio runs a future's callbacks (where a raise once
        # left a task never woken)
        fut.add_done_callback(lambda f: signal.raise_signal(sig))
        fut.set_result(None)
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.01)  # a cleanup that needs the loop
            events.append("benchmark cleaned up")

    with pytest.raises(KeyboardInterrupt):
        run_interruptible(benchmark())
    assert events == ["benchmark cleaned up", f"handler {sig.name}"]
    assert signal.getsignal(sig) is handler  # restored


def test_a_second_signal_raises_at_once_when_the_run_does_not_end(handlers):
    events: list[str] = []
    signal.signal(signal.SIGINT, _noting(events))

    async def stubborn():
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, signal.raise_signal, signal.SIGINT)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled, going on")
            loop.call_later(0.01, signal.raise_signal, signal.SIGINT)
            await asyncio.sleep(0.5)  # the second signal arrives here
            events.append("slept on")

    with pytest.raises(KeyboardInterrupt):
        run_interruptible(stubborn())
    assert events[0] == "cancelled, going on" and "slept on" not in events[:2]


def test_an_ignored_signal_stays_ignored_and_a_run_without_one_returns_its_value(handlers):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    async def run():
        asyncio.get_running_loop().call_soon(signal.raise_signal, signal.SIGTERM)
        await asyncio.sleep(0.05)
        return "result"

    assert run_interruptible(run()) == "result"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN

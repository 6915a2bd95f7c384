"""A cancelled benchmark (Ctrl-C in a worker) stops: no layer swallows the cancellation."""

from __future__ import annotations

import asyncio

import pytest

from tuner.loadgen.cancel import cancel_and_wait
from tuner.loadgen.http1 import _within

pytestmark = pytest.mark.unit


def test_a_cancel_that_arrives_with_the_reply_is_not_swallowed():
    """Python 3.11's wait_for returns the result when the awaited future completes in the
    same loop iteration as the cancel; a request loop then went on sending requests."""
    async def main():
        fut = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(_within(fut, 10))
        await asyncio.sleep(0)  # the task now awaits fut
        fut.set_result("reply")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_reply_in_time_is_returned_and_a_late_one_times_out():
    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop.call_later(0.01, fut.set_result, "reply")
        assert await _within(fut, 5) == "reply"
        with pytest.raises(TimeoutError):
            await _within(loop.create_future(), 0.01)

    asyncio.run(main())


def test_stopping_a_helper_task_does_not_swallow_the_stoppers_own_cancellation():
    """A probe's stop() awaits its cancelled task; a Ctrl-C that cancels the benchmark
    during that wait must still end the benchmark."""
    async def helper():
        try:
            await asyncio.sleep(10)
        finally:
            await asyncio.sleep(0.05)  # a cleanup that takes a moment

    async def stopper(task, after):
        await cancel_and_wait(task)
        after.append("went on")

    async def main():
        after: list[str] = []
        task = asyncio.create_task(helper())
        await asyncio.sleep(0)
        outer = asyncio.create_task(stopper(task, after))
        await asyncio.sleep(0.01)  # outer now waits for the helper's cleanup
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        assert after == [] and task.cancelled()

        alone = asyncio.create_task(helper())
        await asyncio.sleep(0)
        await cancel_and_wait(alone)  # the helper's own cancellation is not raised
        assert alone.cancelled()
        await cancel_and_wait(None)

    asyncio.run(main())

"""A cancelled benchmark (Ctrl-C in a worker) stops: no layer swallows the cancellation."""

from __future__ import annotations

import asyncio

import pytest

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

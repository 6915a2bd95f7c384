"""Stopping a helper task (a sampler, a scraper) without swallowing a cancellation of the
task that stops it."""

from __future__ import annotations

import asyncio


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel ``task`` and wait until it has ended.

    ``with suppress(CancelledError): await task`` would also swallow the caller's own
    cancellation when it arrives during the wait (a Ctrl-C that cancels the benchmark), and
    the benchmark would run on to its end; this re-raises it.
    """
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        me = asyncio.current_task()
        if me is not None and me.cancelling():
            raise

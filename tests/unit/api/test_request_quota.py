"""request_percentage charges the time a handler runs on the event loop, not the time it waits
(api/throttle.py)."""

from __future__ import annotations

import asyncio
import time

from kraft.server.quotas import TimedAwait


async def test_the_time_a_handler_waits_is_not_charged() -> None:
    async def waits() -> str:
        await asyncio.sleep(0.3)  # the subject: a handler that waits, not works
        return "done"

    async def works() -> str:
        end = time.perf_counter() + 0.05
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0)
        return "done"

    waiting, working = TimedAwait(waits()), TimedAwait(works())
    assert await waiting == "done" and await working == "done"
    assert waiting.busy_s < 0.3  # the 0.3 s asleep is not in it
    assert working.busy_s >= 0.05


async def test_an_exception_passes_through() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("no")

    timed = TimedAwait(fails())
    try:
        await timed
    except ValueError as e:
        assert str(e) == "no"
    else:
        raise AssertionError("the exception was lost")

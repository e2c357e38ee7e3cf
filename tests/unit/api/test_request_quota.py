"""request_percentage charges the time a handler runs on the event loop, not the time it waits
(api/throttle.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from conftest import ClientFactory
from kraft.api import throttle
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


async def test_a_request_is_timed_only_once_a_client_quota_exists(make_client: ClientFactory,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's ClientQuotaManager records nothing while no quota is configured: the timing of
    every step of every request (and a quota look-up) cost each request for nothing. Counted: the
    timed requests, none before a quota exists, every one after."""
    timed: list[object] = []

    class Counted(TimedAwait):
        def __init__(self, coro: Any) -> None:
            timed.append(coro)
            super().__init__(coro)

    monkeypatch.setattr(throttle, "TimedAwait", Counted)
    client = await make_client()
    for _ in range(3):
        assert (await client.get("/v1/metadata")).status == 200
    assert timed == []
    resp = await client.post("/v1/client-quotas", json={"entries": [
        {"entity": {"user": "someone-else"}, "ops": [{"key": "request_percentage", "value": 50}]}]})
    assert resp.status == 200, await resp.text()
    deadline = time.monotonic() + 10
    while not (await (await client.get("/v1/client-quotas")).json())["entries"]:
        assert time.monotonic() < deadline, "the quota never reached the node's image"
        await asyncio.sleep(0.01)
    timed.clear()
    assert (await client.get("/v1/metadata")).status == 200
    assert len(timed) == 1

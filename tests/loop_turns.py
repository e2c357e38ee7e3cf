"""Counting event-loop turns: a deterministic check that a long piece of work lets other tasks
run (no timing: machines are noisy)."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable


@asynccontextmanager
async def loop_turns() -> AsyncIterator[Callable[[], int]]:
    """`async with loop_turns() as turns: await work()`; then `turns()` is how many times a
    task that only yields got to run while `work` ran."""
    count = 0
    stop = asyncio.Event()

    async def tick() -> None:
        nonlocal count
        while not stop.is_set():
            count += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    started = count
    try:
        yield lambda: final if stop.is_set() else count - started
    finally:
        final = count - started
        stop.set()
        await ticker

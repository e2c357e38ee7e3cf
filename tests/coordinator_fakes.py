"""Fakes for the coordinator runtime's tests (what is outside the runtime: the replica manager and
the clock).

`FakePartitions`: the runtime's `PartitionWriter` over real partition logs led here (transaction
markers too, committed at once). A test says
what the next appends of a partition do (`outcomes[p]`): "commit" (default: appended, then the high
watermark passes it), "refuse" (NOT_ENOUGH_REPLICAS before appending), "not_leader"
(NOT_LEADER_OR_FOLLOWER before appending), "uncommitted" (appended, then REQUEST_TIMED_OUT: the
ISR did not catch up); `hold(p)` keeps the next commits in flight until `release(p)`; `commit(p)`
moves the high watermark to the log end, as followers catching up do. Reads below the high
watermark wait for it on an event, as the replica manager's do.

`ManualScheduler`: the runtime's timer scheduler and clock; `advance(ms)` runs what is due and
counts it, so a test counts wake-ups instead of measuring time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from kraft.server.records import FetchPartitionResult, PartitionOffsets, ProduceEntry, ProducePartitionResult
from kraft.log.config import LogConfig
from kraft.log.errors import LogError
from kraft.log.partition_log import PartitionLog


class FakePartitions:
    def __init__(self, directory: Path, topic: str) -> None:
        self.directory = directory
        self.topic = topic
        self.logs: dict[int, PartitionLog] = {}
        self.outcomes: dict[int, deque[str]] = defaultdict(deque)
        self.appends = 0  # produce calls
        self._held: dict[int, asyncio.Event] = {}
        self._advanced: dict[int, asyncio.Event] = defaultdict(asyncio.Event)

    def log(self, partition: int) -> PartitionLog:
        if partition not in self.logs:
            self.logs[partition] = PartitionLog.open(self.directory / f"{self.topic}-{partition}", LogConfig(), 0)
        return self.logs[partition]

    def close(self) -> None:
        for plog in self.logs.values():
            plog.close()

    def hold(self, partition: int) -> None:
        self._held[partition] = asyncio.Event()

    def release(self, partition: int) -> None:
        self._held.pop(partition).set()

    def commit(self, partition: int) -> None:
        plog = self.log(partition)
        plog.high_watermark = plog.log_end_offset
        self._advanced[partition].set()

    async def produce(self, entries: Sequence[ProduceEntry], acks: int, timeout_ms: int, *,
                      coordinator: bool = False) -> list[ProducePartitionResult]:
        assert acks == -1 and len(entries) == 1
        [entry] = entries
        p = entry.partition
        self.appends += 1
        outcome = self.outcomes[p].popleft() if self.outcomes[p] else "commit"
        if outcome in ("refuse", "not_leader"):
            code = "NOT_ENOUGH_REPLICAS" if outcome == "refuse" else "NOT_LEADER_OR_FOLLOWER"
            return [ProducePartitionResult(entry.topic, p, -1, -1, code, f"{outcome} (fake)")]
        plog = self.log(p)
        try:
            info = plog.append_as_leader(entry.records, 0, 0, coordinator=coordinator)
        except LogError as e:  # refused by the log, as the replica manager answers it
            return [ProducePartitionResult(entry.topic, p, -1, -1, e.error_code, str(e))]
        if outcome == "uncommitted":
            return [ProducePartitionResult(entry.topic, p, -1, -1, "REQUEST_TIMED_OUT", "not replicated in time (fake)")]
        assert outcome == "commit", outcome
        held = self._held.get(p)
        if held is not None:
            await held.wait()
        self.commit(p)
        return [ProducePartitionResult(entry.topic, p, info.first_offset, plog.log_start_offset)]

    async def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool, timeout_ms: int) -> int:
        """A marker, committed at once (the outcomes are for produce)."""
        plog = self.log(partition)
        info = plog.append_control(producer_id, producer_epoch, coordinator_epoch, commit, 0, 0)
        self.commit(partition)
        return info.first_offset

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        plog = self.log(partition)
        return PartitionOffsets(plog.log_start_offset, plog.high_watermark, plog.log_end_offset)

    async def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> tuple[int, int] | None:
        return None

    async def read_committed(self, topic: str, partition: int, offset: int, max_bytes: int,
                             max_wait_ms: int) -> FetchPartitionResult:
        plog = self.log(partition)
        if offset >= plog.high_watermark:
            advanced = self._advanced[partition]
            advanced.clear()
            try:
                await asyncio.wait_for(advanced.wait(), max_wait_ms / 1000)
            except asyncio.TimeoutError:
                pass
        info = plog.read(offset, max_bytes, max_offset=plog.high_watermark)
        return FetchPartitionResult(topic, partition, info.high_watermark, info.log_start_offset, info.log_end_offset,
                                    info.records)


@dataclass(eq=False)
class _Handle:
    callback: Callable[[], Any]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class ManualScheduler:
    now_ms: int = 1_000_000
    ran: int = 0  # callbacks run so far
    _due: list[tuple[int, int, _Handle]] = field(default_factory=list)
    _order: Any = field(default_factory=itertools.count)

    def clock(self) -> int:
        return self.now_ms

    def call_later(self, delay_s: float, callback: Callable[[], Any]) -> _Handle:
        handle = _Handle(callback)
        heapq.heappush(self._due, (self.now_ms + round(delay_s * 1000), next(self._order), handle))
        return handle

    def pending(self) -> int:
        return sum(1 for _, _, h in self._due if not h.cancelled)

    def advance(self, ms: int) -> int:
        """Moves the clock `ms` forward, running what falls due in order; how many ran."""
        target = self.now_ms + ms
        ran = 0
        while self._due and self._due[0][0] <= target:
            due, _, handle = heapq.heappop(self._due)
            if handle.cancelled:
                continue
            self.now_ms = max(self.now_ms, due)
            handle.callback()
            ran += 1
        self.now_ms = target
        self.ran += ran
        return ran

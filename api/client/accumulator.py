"""The producer's record accumulator (pure: no threads, no I/O, time passed in as `now_ms`).

Records are appended to per-partition batches (a deque each: the open batch last, retried batches
at the front). `ready` says which leaders have something to send (a full batch, an expired linger,
or a flush), `drain` takes all sendable batches of those leaders, bounded by `max_request_size`,
and closes them, so the next record for that partition opens a new batch (which is when the
sticky partitioner moves on). The caller serialises access with its own lock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from api.client.futures import ProduceResult, RecordFuture
from api.client.types import TopicPartition
from log.batch import HEADER_SIZE

# Per-record bytes beyond key and value in the msgpack payload (array header, deltas, headers).
RECORD_OVERHEAD = 16

LeaderOf = Callable[[TopicPartition], "int | None"]


@dataclass(eq=False)
class ProducerBatch:
    tp: TopicPartition
    created_ms: int
    result: ProduceResult
    records: list[tuple] = field(default_factory=list)  # (key, value, headers, timestamp_ms)
    size: int = HEADER_SIZE  # estimated encoded size
    closed: bool = False  # drained once: never appended to again
    attempts: int = 0
    retry_at_ms: int = 0
    encoded: bytes | None = None  # built once, reused by retries

    @property
    def record_count(self) -> int:
        return len(self.records)


@dataclass(frozen=True)
class ReadyCheck:
    ready_nodes: frozenset[int]
    next_ready_ms: int | None  # when something becomes sendable, None when nothing is waiting
    unknown_leader_topics: frozenset[str]


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int) -> None:
        if batch_size <= 0 or linger_ms < 0:
            raise ValueError(f"batch_size must be > 0 and linger_ms >= 0, got {batch_size}, {linger_ms}")
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffered_bytes = 0
        self.incomplete: set[ProducerBatch] = set()
        self.space_waiters = 0  # send() calls blocked on buffer memory: linger no longer applies
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._drain_start = 0  # rotates so a large partition cannot starve the others

    def append(
        self,
        tp: TopicPartition,
        record: tuple,
        size: int,
        now_ms: int,
        abort_on_new_batch: bool = False,
    ) -> tuple[RecordFuture, bool] | None:
        """Adds a record; returns (future, wake_sender) or None when a new batch would be needed
        and `abort_on_new_batch` is set (the sticky partitioner then picks another partition)."""
        dq = self._batches.get(tp)
        if dq is None:
            dq = self._batches[tp] = deque()
        batch = dq[-1] if dq else None
        new_batch = batch is None or batch.closed or batch.size + size > self.batch_size
        if new_batch:
            if abort_on_new_batch:
                return None
            batch = ProducerBatch(tp, now_ms, ProduceResult(tp))
            dq.append(batch)
            self.incomplete.add(batch)
        records = batch.records
        future = RecordFuture(batch.result, len(records), record[3])
        records.append(record)
        batch.size += size
        self.buffered_bytes += size
        return future, new_batch or batch.size >= self.batch_size

    def ready(
        self, now_ms: int, leader_of: LeaderOf, busy_nodes: Iterable[int], force: bool
    ) -> ReadyCheck:
        """Leaders with a sendable batch; `force` (flush, close) ignores linger, as does a full
        buffer (someone waits for memory)."""
        force = force or self.space_waiters > 0
        busy = set(busy_nodes)
        ready: set[int] = set()
        unknown: set[str] = set()
        next_ms: int | None = None
        for tp, dq in self._batches.items():
            if not dq:
                continue
            leader = leader_of(tp)
            if leader is None:
                unknown.add(tp.topic)
                continue
            if leader in ready:
                continue
            first = dq[0]
            if first.attempts:
                due = first.retry_at_ms
                sendable = due <= now_ms
            else:
                due = first.created_ms + self.linger_ms
                sendable = force or due <= now_ms or len(dq) > 1 or first.size >= self.batch_size
            if not sendable:
                next_ms = due if next_ms is None else min(next_ms, due)
            elif leader in busy:
                continue  # the sender wakes when that leader's request completes
            else:
                ready.add(leader)
        return ReadyCheck(frozenset(ready), next_ms, frozenset(unknown))

    def drain(
        self, nodes: Iterable[int], leader_of: LeaderOf, max_request_size: int, now_ms: int
    ) -> dict[int, list[ProducerBatch]]:
        """Takes every sendable batch of the partitions led by `nodes`, at most `max_request_size`
        estimated bytes per node (always at least one batch); drained batches are closed."""
        nodes = set(nodes)
        out: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        items = list(self._batches.items())
        if not items:
            return out
        start = self._drain_start % len(items)
        self._drain_start += 1
        for tp, dq in items[start:] + items[:start]:
            if not dq:
                continue
            leader = leader_of(tp)
            if leader not in nodes:
                continue
            taken = out.setdefault(leader, [])
            while dq:
                batch = dq[0]
                if batch.retry_at_ms > now_ms:
                    break
                if taken and sizes[leader] + batch.size > max_request_size:
                    break
                dq.popleft()
                batch.closed = True
                batch.attempts += 1
                taken.append(batch)
                sizes[leader] = sizes.get(leader, 0) + batch.size
        return {node: batches for node, batches in out.items() if batches}

    def reenqueue(self, batches: list[ProducerBatch], retry_at_ms: int) -> None:
        """Puts batches of one partition back at the front, oldest first, for a retry."""
        for batch in reversed(batches):
            batch.retry_at_ms = retry_at_ms
            self._batches.setdefault(batch.tp, deque()).appendleft(batch)

    def expire(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        """Removes and returns queued batches older than the delivery timeout."""
        expired = []
        for dq in self._batches.values():
            while dq and now_ms - dq[0].created_ms >= delivery_timeout_ms:
                expired.append(dq.popleft())
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        """Removes and returns every queued batch (a forced close)."""
        out = [b for dq in self._batches.values() for b in dq]
        for dq in self._batches.values():
            dq.clear()
        return out

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forgets a batch whose result is settled."""
        self.incomplete.discard(batch)
        self.buffered_bytes -= batch.size - HEADER_SIZE

    def has_queued(self) -> bool:
        return any(self._batches.values())

    def queued(self, tp: TopicPartition) -> list[ProducerBatch]:
        return list(self._batches.get(tp, ()))

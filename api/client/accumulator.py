"""The producer's record accumulator (pure: no threads, no I/O, time passed in as `now_ms`).

Records are appended to per-partition batches (a deque each: the open batch last, retried batches
at the front). Each record is packed into its batch's msgpack buffer as it is appended (one C
call, see `kraft.log.batch.new_row_packer`): nothing per record is kept but the bytes, so a batch is
framed with one copy and the cyclic GC has nothing to scan. `ready` says which leaders have
something to send (a full batch, an expired linger, or a flush), `drain` takes all sendable
batches of those leaders, bounded by `max_request_size`, and closes them, so the next record for
that partition opens a new batch (which is when the sticky partitioner moves on). With
`isolate_retries` (idempotent producers) a retried batch is drained alone for its partition, so the
broker's answer (the original offsets, for a duplicate) is that batch's alone. The caller
serialises access with its own lock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import msgpack

from kraft.api.client.futures import ProduceResult, RecordFuture
from kraft.api.client.idempotence import BatchSequence
from kraft.api.client.types import Headers, TopicPartition
from kraft.log.batch import HEADER_SIZE, frame_rows, new_row_packer

# Per-record bytes beyond key and value in the msgpack payload (array header, deltas, headers).
RECORD_OVERHEAD = 16
# A batch's packer starts with room for this much (it grows for an oversized record).
_MAX_PACKER_HINT = 1024 * 1024

LeaderOf = Callable[[TopicPartition], "int | None"]


@dataclass(eq=False, slots=True)
class ProducerBatch:
    tp: TopicPartition
    created_ms: int
    result: ProduceResult
    base_timestamp: int
    packer: msgpack.Packer | None  # the packed rows; None once encoded
    pack: Callable[[Any], Any]  # packer.pack, bound once
    max_timestamp: int = 0
    record_count: int = 0
    size: int = HEADER_SIZE  # estimated encoded size
    closed: bool = False  # drained once: never appended to again
    attempts: int = 0
    retry_at_ms: int = 0
    encoded: bytes | None = None  # built once, reused by retries
    sequence: BatchSequence | None = None  # idempotent producers: set on the first drain
    last_error: Any = None  # the KraftError of the last retried attempt, reported if it expires

    def encode(self, compression: str, transactional: bool = False) -> bytes:
        """The batch's bytes (framed once, on first call; the packer is released then)."""
        if self.encoded is None:
            assert self.packer is not None and self.record_count > 0
            seq = self.sequence
            with self.packer.getbuffer() as rows:
                self.encoded = frame_rows(
                    rows, self.record_count, base_timestamp=self.base_timestamp,
                    max_timestamp=self.max_timestamp, compression=compression,
                    producer_id=-1 if seq is None else seq.producer_id,
                    producer_epoch=-1 if seq is None else seq.producer_epoch,
                    base_sequence=-1 if seq is None else seq.base_sequence, transactional=transactional,
                )
            self.packer = None
            self.pack = _released
        return self.encoded


def _released(_row: Any) -> None:
    raise AssertionError("append to an encoded batch")


@dataclass(frozen=True)
class ReadyCheck:
    ready_nodes: frozenset[int]
    next_ready_ms: int | None  # when something becomes sendable, None when nothing is waiting
    unknown_leader_topics: frozenset[str]


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int, isolate_retries: bool = False) -> None:
        if batch_size <= 0 or linger_ms < 0:
            raise ValueError(f"batch_size must be > 0 and linger_ms >= 0, got {batch_size}, {linger_ms}")
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.isolate_retries = isolate_retries
        self.buffered_bytes = 0
        self.incomplete: set[ProducerBatch] = set()
        self.space_waiters = 0  # send() calls blocked on buffer memory: linger no longer applies
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._open: dict[TopicPartition, ProducerBatch] = {}  # the batch appends go to, per partition
        self._drain_start = 0  # rotates so a large partition cannot starve the others
        self._packer_hint = min(batch_size + batch_size // 4, _MAX_PACKER_HINT)

    def try_append(
        self, tp: TopicPartition, key: bytes | None, value: bytes | None, headers: Headers,
        timestamp: int, size: int,
    ) -> RecordFuture | None:
        """Appends to the open batch of `tp` when the record fits in it; None when a new batch is
        needed (then `append_new_batch`). The producer's per-record path: keep it lean."""
        batch = self._open.get(tp)
        if batch is None or batch.size + size > self.batch_size:
            return None
        index = batch.record_count
        batch.pack((index, timestamp - batch.base_timestamp, key, value, headers))
        if timestamp > batch.max_timestamp:
            batch.max_timestamp = timestamp
        batch.record_count = index + 1
        batch.size += size
        self.buffered_bytes += size
        return RecordFuture(batch.result, index, timestamp)

    def append_new_batch(
        self, tp: TopicPartition, key: bytes | None, value: bytes | None, headers: Headers,
        timestamp: int, size: int, now_ms: int,
    ) -> RecordFuture:
        """Opens a new batch of `tp` (the previous open one takes no more records) holding the
        record; the sender should be woken (a linger timer starts, or a full batch waits)."""
        packer = new_row_packer(self._packer_hint)
        batch = ProducerBatch(tp, now_ms, ProduceResult(tp), timestamp, packer, packer.pack, timestamp)
        self._batches.setdefault(tp, deque()).append(batch)
        self._open[tp] = batch
        self.incomplete.add(batch)
        batch.pack((0, 0, key, value, headers))
        batch.record_count = 1
        batch.size += size
        self.buffered_bytes += size
        return RecordFuture(batch.result, 0, timestamp)

    def append(
        self,
        tp: TopicPartition,
        record: tuple[bytes | None, bytes | None, Headers, int],
        size: int,
        now_ms: int,
        abort_on_new_batch: bool = False,
    ) -> tuple[RecordFuture, bool] | None:
        """Adds a `(key, value, headers, timestamp)` record; returns (future, new batch opened:
        wake the sender) or None when a new batch would be needed and `abort_on_new_batch` is
        set (the sticky partitioner then picks another partition)."""
        future = self.try_append(tp, *record, size)
        if future is not None:
            return future, False
        if abort_on_new_batch:
            return None
        return self.append_new_batch(tp, *record, size, now_ms), True

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
                self._close(batch)
                batch.attempts += 1
                taken.append(batch)
                sizes[leader] = sizes.get(leader, 0) + batch.size
                if batch.attempts > 1 and self.isolate_retries:
                    break  # retries sit at the front: nothing of this partition was taken before
        return {node: batches for node, batches in out.items() if batches}

    def _close(self, batch: ProducerBatch) -> None:
        batch.closed = True
        if self._open.get(batch.tp) is batch:
            del self._open[batch.tp]

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
                self._close(expired[-1])
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        """Removes and returns every queued batch (a forced close)."""
        out = [b for dq in self._batches.values() for b in dq]
        for dq in self._batches.values():
            dq.clear()
        for batch in out:
            self._close(batch)
        return out

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forgets a batch whose result is settled."""
        self.incomplete.discard(batch)
        self.buffered_bytes -= batch.size - HEADER_SIZE

    def queued_partitions(self) -> set[TopicPartition]:
        return {tp for tp, dq in self._batches.items() if dq}

    def has_queued(self) -> bool:
        return any(self._batches.values())

    def queued(self, tp: TopicPartition) -> list[ProducerBatch]:
        return list(self._batches.get(tp, ()))

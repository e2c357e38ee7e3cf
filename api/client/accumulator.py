"""The producer's record accumulator (pure: no threads, no I/O, time passed in as `now_ms`).

Records are appended to per-partition batches (a deque each: the open batch last, retried batches
at the front). Each record is packed into its batch's msgpack buffer as it is appended (one C
call, see `kraft.log.batch.new_row_packer`): nothing per record is kept but the bytes, so a batch is
framed with one copy and the cyclic GC has nothing to scan. `ready` says which leaders have
something to send (a full batch, an expired linger, or a flush), `drain` takes all sendable
batches of those leaders, bounded by `max_request_size`, and closes them, so the next record for
that partition opens a new batch (which is when the sticky partitioner moves on). With
`one_batch_per_partition` (idempotent producers, Kafka's drain) a request takes at most one batch
of each partition, so a partition has at most as many batches in flight as its leader has
requests (5), the batches a broker keeps per producer: a retried batch is always recognised with
its original offsets, and its answer is that batch's alone. With several requests in flight per
leader, a retried batch waits until nothing else of its partition is in flight (`in_flight`,
batches per partition, from the sender) and goes back into its place by creation order
(`reenqueue`), so a partition's retries reach the broker one at a time and in sequence order, as
Kafka's RecordAccumulator does (insertInSequenceOrder, and no retry drained while an earlier
batch of its partition is in flight). The caller serialises access with its own
lock.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import msgpack

from kraft.api.client.futures import ProduceResult, RecordFuture
from kraft.api.client.idempotence import BatchSequence
from kraft.api.client.types import Headers, TopicPartition
from kraft.log.batch import HEADER_SIZE, ROW_OVERHEAD as RECORD_OVERHEAD, frame_rows, new_row_packer, pack_rows
# A batch's packer starts with room for this much (it grows for an oversized record).
_MAX_PACKER_HINT = 1024 * 1024

LeaderOf = Callable[[TopicPartition], "int | None"]
NOTHING_IN_FLIGHT: Mapping[TopicPartition, int] = {}


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
    sent_behind_unacked: bool = False  # idempotent: an earlier batch of its partition was unacked at its last send
    last_error: Any = None  # the KraftError of the last retried attempt, reported if it expires
    number: int = 0  # creation order in its accumulator: a retry goes back into its place

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
    def __init__(self, batch_size: int, linger_ms: int, one_batch_per_partition: bool = False) -> None:
        if batch_size <= 0 or linger_ms < 0:
            raise ValueError(f"batch_size must be > 0 and linger_ms >= 0, got {batch_size}, {linger_ms}")
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.one_batch_per_partition = one_batch_per_partition
        self.buffered_bytes = 0
        self.incomplete: set[ProducerBatch] = set()
        self.space_waiters = 0  # send() calls blocked on buffer memory: linger no longer applies
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._open: dict[TopicPartition, ProducerBatch] = {}  # the batch appends go to, per partition
        self._drain_start = 0  # rotates so a large partition cannot starve the others
        self._numbers = itertools.count()
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
        batch = self._new_batch(tp, timestamp, now_ms)
        batch.pack((0, 0, key, value, headers))
        batch.record_count = 1
        batch.size += size
        self.buffered_bytes += size
        return RecordFuture(batch.result, 0, timestamp)

    def _new_batch(self, tp: TopicPartition, timestamp: int, now_ms: int) -> ProducerBatch:
        packer = new_row_packer(self._packer_hint)
        batch = ProducerBatch(tp, now_ms, ProduceResult(tp), timestamp, packer, packer.pack, timestamp,
                              number=next(self._numbers))
        self._batches.setdefault(tp, deque()).append(batch)
        self._open[tp] = batch
        self.incomplete.add(batch)
        return batch

    def try_append_values(
        self, tp: TopicPartition, values: list[bytes], ends: list[int], start: int, timestamp: int, room: int,
    ) -> tuple[ProduceResult, int, int] | None:
        """Appends keyless, headerless `values[start:]` to the open batch of `tp` as far as they
        fit in it and in `room` more buffered bytes, in one pass (`ends`: `row_ends` of the
        values); (the batch's result, the first one's index in it, the index after the last
        appended) or None when not even the first fits (then `append_values_new_batch`)."""
        batch = self._open.get(tp)
        if batch is None:
            return None
        return self._pack_values(batch, values, ends, start, timestamp, room, False)

    def append_values_new_batch(
        self, tp: TopicPartition, values: list[bytes], ends: list[int], start: int, timestamp: int, room: int,
        now_ms: int,
    ) -> tuple[ProduceResult, int, int]:
        """`try_append_values` into a new batch of `tp`, which holds at least the first value."""
        result = self._pack_values(self._new_batch(tp, timestamp, now_ms), values, ends, start, timestamp, room, True)
        assert result is not None
        return result

    def _pack_values(
        self, batch: ProducerBatch, values: list[bytes], ends: list[int], start: int, timestamp: int, room: int,
        at_least_one: bool,
    ) -> tuple[ProduceResult, int, int] | None:
        before = ends[start - 1] if start else 0
        stop = bisect_right(ends, before + min(self.batch_size - batch.size, room), start)
        if stop == start:
            if not at_least_one:
                return None
            stop = start + 1
        index = batch.record_count
        pack_rows(batch.pack, index, timestamp - batch.base_timestamp, values, start, stop)
        if timestamp > batch.max_timestamp:
            batch.max_timestamp = timestamp
        size = ends[stop - 1] - before
        batch.record_count = index + stop - start
        batch.size += size
        self.buffered_bytes += size
        return batch.result, index, stop

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
        self, now_ms: int, leader_of: LeaderOf, busy_nodes: Iterable[int], force: bool,
        in_flight: Mapping[TopicPartition, int] = NOTHING_IN_FLIGHT,
    ) -> ReadyCheck:
        """Leaders with a sendable batch; `force` (flush, close) ignores linger, as does a full
        buffer (someone waits for memory). `busy_nodes` have no request to spare; `in_flight`
        counts each partition's batches in flight (a retry waits for them)."""
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
            if first.attempts and in_flight.get(tp):
                continue  # the sender wakes when that partition's request completes
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
        self, nodes: Iterable[int], leader_of: LeaderOf, max_request_size: int, now_ms: int,
        in_flight: Mapping[TopicPartition, int] = NOTHING_IN_FLIGHT,
    ) -> dict[int, list[ProducerBatch]]:
        """Takes every sendable batch of the partitions led by `nodes`, at most `max_request_size`
        estimated bytes per node (always at least one batch); drained batches are closed. A
        partition whose first batch is a retry gives nothing while `in_flight` counts any of its
        batches."""
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
            if leader not in nodes or (dq[0].attempts and in_flight.get(tp)):
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
                if self.one_batch_per_partition:
                    break
        return {node: batches for node, batches in out.items() if batches}

    def _close(self, batch: ProducerBatch) -> None:
        batch.closed = True
        if self._open.get(batch.tp) is batch:
            del self._open[batch.tp]

    def reenqueue(self, batches: list[ProducerBatch], retry_at_ms: int) -> None:
        """Puts batches back into their partitions' queues for a retry, each in its place by
        creation order (a later batch of the partition may have come back first)."""
        for batch in batches:
            batch.retry_at_ms = retry_at_ms
            dq = self._batches.setdefault(batch.tp, deque())
            at = next((i for i, queued in enumerate(dq) if queued.number > batch.number), len(dq))
            dq.insert(at, batch)

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

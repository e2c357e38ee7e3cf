"""ProducerStateManager: the idempotent-producer state of one partition, after Kafka's (KIP-98).

Pure and header-only: it reads `producer_id`, `producer_epoch`, `base_sequence`, the offsets and the
max timestamp of batch headers and never decodes records nor reads a clock (`now_ms` is passed in).
Per producer id it keeps the current epoch and the metadata of its last `MAX_BATCHES_PER_PRODUCER`
batches (sequences and the offsets they were appended at), so that a retried batch is recognised
and answered with its original offsets instead of being appended twice.

The leader calls `check_batches` before appending (sequence rules below) and `update` with the
stamped headers after; followers and recovery only `update`, so every replica rebuilds the same
state from the same log. `snapshot()`/`from_snapshot` let a partition start without rescanning its
whole log (docs/idempotence.md).

Rules for a batch with producer_id >= 0 (Kafka's ProducerAppendInfo.checkSequence):
- an epoch below the producer's current epoch is fenced: INVALID_PRODUCER_EPOCH;
- a higher epoch must start at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise);
- same epoch: equal to one of the kept batches (same first and last sequence) is a duplicate
  answered with its original offsets; a batch wholly inside the sequences already appended in
  this epoch but older than the kept batches is a duplicate too, with unknown offsets (-1, as
  Kafka's DUPLICATE_SEQUENCE_NUMBER, which its client takes as success): sequences of an epoch
  are appended contiguously from 0, so every one up to the last was written once. This lets a
  writer replay more than five batches (the Spark sink's micro-batches);
  `last_sequence + 1` is appended; anything else is OUT_OF_ORDER_SEQUENCE_NUMBER;
- an unknown producer must start at sequence 0, else UNKNOWN_PRODUCER_ID (its state was expired,
  evicted or lost: the client resets its sequences, as Kafka's did before KIP-360).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from kraft.log.batch import BatchHeader
from kraft.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)

MAX_BATCHES_PER_PRODUCER = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max in flight)
MAX_PRODUCERS = 10_000  # per partition; past it the least recently written producer is evicted
NO_PRODUCER_ID = -1
INT32_MAX = 2**31 - 1
SNAPSHOT_VERSION = 1


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from INT32_MAX to 0, as Kafka's DefaultRecordBatch.incrementSequence."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def last_sequence(header: BatchHeader) -> int:
    return increment_sequence(header.base_sequence, header.last_offset_delta)


@dataclass(frozen=True)
class Append:
    """The batch is new and in sequence (or not idempotent): append it."""


@dataclass(frozen=True)
class Duplicate:
    """The batch was appended before: append nothing, answer with its original offsets (-1 when
    the batch is older than the ones kept)."""

    first_offset: int
    last_offset: int


APPEND = Append()
UNKNOWN_OFFSETS_DUPLICATE = Duplicate(-1, -1)
Verdict = Append | Duplicate


@dataclass(frozen=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    last_timestamp: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence

    def find_duplicate(self, header: BatchHeader) -> Duplicate | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        last = last_sequence(header)
        for batch in self.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last:
                return Duplicate(batch.first_offset, batch.last_offset)
        if header.base_sequence <= last <= self.last_sequence:  # no wrap: wholly written before
            return UNKNOWN_OFFSETS_DUPLICATE
        return None


class ProducerStateManager:
    def __init__(
        self, producer_id_expiration_ms: int = 86_400_000, max_producers: int = MAX_PRODUCERS
    ) -> None:
        assert max_producers > 0
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_producers = max_producers
        # insertion order is last-write order: the first entry is the one to evict
        self._producers: dict[int, ProducerStateEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> list[ProducerStateEntry]:
        """Every producer kept, least recently written first."""
        return list(self._producers.values())

    # -- leader checks ---------------------------------------------------------------------------

    def check(self, header: BatchHeader) -> Verdict:
        """The verdict for one batch against the current state; raises a `log.errors` error."""
        return self.check_batches((header,))[0]

    def check_batches(self, headers: Sequence[BatchHeader]) -> tuple[Verdict, ...]:
        """Verdicts for the batches of one request, in order, each checked against the state as
        the batches before it would leave it. Raises on the first bad batch, changing nothing."""
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last sequence) so far
        verdicts: list[Verdict] = []
        for header in headers:
            pid = header.producer_id
            if pid < 0:
                verdicts.append(APPEND)
                continue
            if header.producer_epoch < 0 or header.base_sequence < 0:
                raise InvalidRecordError(
                    f"batch of producer {pid} has epoch {header.producer_epoch} and base sequence "
                    f"{header.base_sequence}; an idempotent batch needs both >= 0"
                )
            entry = self._producers.get(pid)
            if pid not in pending and entry is not None:
                duplicate = entry.find_duplicate(header)
                if duplicate is not None:
                    verdicts.append(duplicate)
                    continue
            current = pending.get(pid) or (
                (entry.producer_epoch, entry.last_sequence) if entry is not None else None
            )
            _check_sequence(header, current)
            pending[pid] = (header.producer_epoch, last_sequence(header))
            verdicts.append(APPEND)
        return tuple(verdicts)

    # -- state changes ---------------------------------------------------------------------------

    def update(self, header: BatchHeader) -> None:
        """Records an appended batch (its header as stamped, with its offsets), unchecked: the
        leader checked it, and followers and recovery take what the log holds."""
        pid = header.producer_id
        if pid < 0:
            return
        entry = self._producers.pop(pid, None)
        if entry is None or header.producer_epoch != entry.producer_epoch:
            entry = ProducerStateEntry(pid, header.producer_epoch, header.max_timestamp)
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        entry.batches.append(BatchMetadata(
            header.base_sequence, last_sequence(header), header.base_offset, header.last_offset
        ))
        self._producers[pid] = entry
        while len(self._producers) > self.max_producers:
            del self._producers[next(iter(self._producers))]

    def update_all(self, headers: Iterable[BatchHeader]) -> None:
        for header in headers:
            self.update(header)

    def remove_expired(self, now_ms: int) -> int:
        """Forgets producers whose last batch timestamp is `producer_id_expiration_ms` old
        (Kafka's producer.id.expiration.ms); returns how many."""
        expired = [
            pid for pid, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def clear(self) -> None:
        self._producers.clear()

    # -- snapshots -------------------------------------------------------------------------------

    def snapshot(self) -> list[list[Any]]:
        """The state as builtins (msgpack-friendly), in eviction order."""
        return [
            [e.producer_id, e.producer_epoch, e.last_timestamp,
             [[b.first_sequence, b.last_sequence, b.first_offset, b.last_offset] for b in e.batches]]
            for e in self._producers.values()
        ]

    @classmethod
    def from_snapshot(
        cls, entries: list[list[Any]], producer_id_expiration_ms: int = 86_400_000,
        max_producers: int = MAX_PRODUCERS,
    ) -> ProducerStateManager:
        """Raises ValueError/TypeError on a malformed snapshot (the caller rebuilds instead)."""
        manager = cls(producer_id_expiration_ms, max_producers)
        for pid, epoch, last_timestamp, batches in entries:
            if not batches:
                raise ValueError(f"producer {pid} has no batches in the snapshot")
            entry = ProducerStateEntry(int(pid), int(epoch), int(last_timestamp))
            entry.batches.extend(BatchMetadata(*map(int, b)) for b in batches)
            manager._producers[entry.producer_id] = entry
        return manager


def _check_sequence(header: BatchHeader, current: tuple[int, int] | None) -> None:
    pid, epoch, sequence = header.producer_id, header.producer_epoch, header.base_sequence
    if current is None:
        if sequence != 0:
            raise UnknownProducerIdError(
                f"producer {pid} is unknown to this partition (expired or never seen) and its "
                f"batch starts at sequence {sequence}, not 0"
            )
        return
    current_epoch, current_last = current
    if epoch < current_epoch:
        raise InvalidProducerEpochError(
            f"producer {pid} epoch {epoch} is fenced: the current epoch is {current_epoch}"
        )
    if epoch > current_epoch:
        if sequence != 0:
            raise OutOfOrderSequenceError(
                f"producer {pid} new epoch {epoch} must start at sequence 0, not {sequence}"
            )
        return
    if sequence != increment_sequence(current_last, 1):
        raise OutOfOrderSequenceError(
            f"producer {pid} epoch {epoch}: sequence {sequence} does not follow "
            f"{current_last} (expected {increment_sequence(current_last, 1)})"
        )

"""ProducerStateManager: the idempotent and transactional producer state of one partition, after
Kafka's (KIP-98).

Pure: it reads `producer_id`, `producer_epoch`, `base_sequence`, the offsets, the attributes and the
max timestamp of batch headers, plus the marker of a control batch (decoded by the caller,
`log/control.py`), and never reads a clock (`now_ms` is passed in).
Per producer id it keeps the current epoch and the metadata of its last `MAX_BATCHES_PER_PRODUCER`
batches (sequences and the offsets they were appended at), so that a retried batch is recognised
and answered with its original offsets instead of being appended twice; and for transactions the
first offset of its open transaction here and the last coordinator epoch that ended one.

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

Transactions (Kafka's ProducerAppendInfo and UnifiedLog.analyzeAndValidateProducerState):
- a transactional batch that would begin a transaction here (its producer has none open at its
  epoch) must have been verified: the coordinator's AddPartitionsToTxn put (producer id, epoch)
  in the partition's verified set (`verify_transaction`), else INVALID_TXN_STATE
  (`TxnNotVerifiedError`; KIP-890: a late write of a finished transaction must not start a
  hanging one). The transaction's first batch
  uses the verification up; its marker clears what is left;
- a plain batch of a producer whose transaction is open here is INVALID_TXN_STATE;
- a marker (`check_marker`) of an epoch below the producer's is INVALID_PRODUCER_EPOCH, of a
  coordinator epoch below the last one seen TRANSACTION_COORDINATOR_FENCED.
The first unstable offset (`first_unstable_offset`) is the first offset of the oldest transaction
still open, or completed by a marker the high watermark has not passed yet (Kafka's
unreplicated transactions: its outcome could still be truncated away); the log's last stable
offset derives from it. Producers with an open transaction are never expired nor evicted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

from kraft.log.batch import BatchHeader
from kraft.log.control import EndTransactionMarker
from kraft.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    TxnNotVerifiedError,
    UnknownProducerIdError,
)

MAX_BATCHES_PER_PRODUCER = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max in flight)
MAX_PRODUCERS = 10_000  # per partition; past it the least recently written producer is evicted
NO_PRODUCER_ID = -1
NO_OFFSET = -1
NO_SEQUENCE = -1
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
    """The batch was appended before: append nothing, answer with its original offsets and
    max timestamp (Kafka answers that as the log append time; -1 when the batch is older than
    the ones kept)."""

    first_offset: int
    last_offset: int
    timestamp: int = -1


APPEND = Append()
UNKNOWN_OFFSETS_DUPLICATE = Duplicate(-1, -1)
Verdict = Append | Duplicate


@dataclass(frozen=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int = -1  # the batch's max timestamp as appended (-1: a snapshot without it)


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction a marker ended: its first offset here, the marker's offset, whether it was
    aborted, and the last stable offset at that moment (for the `.txnindex` entry)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    last_timestamp: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )
    coordinator_epoch: int = -1  # of the last marker
    current_txn_first_offset: int = NO_OFFSET  # the open transaction's first offset here

    @property
    def last_sequence(self) -> int:
        """NO_SEQUENCE when no data batch of this epoch is known (only a marker)."""
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def in_transaction(self) -> bool:
        return self.current_txn_first_offset >= 0

    def find_duplicate(self, header: BatchHeader) -> Duplicate | None:
        if header.producer_epoch != self.producer_epoch or not self.batches:
            return None
        last = last_sequence(header)
        for batch in self.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last:
                return Duplicate(batch.first_offset, batch.last_offset, batch.timestamp)
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
        # open transactions: first offset -> producer id, in first-offset order (appends are)
        self._ongoing: dict[int, int] = {}
        # transactions ended by a marker the high watermark has not passed: first -> marker offset
        self._unreplicated: dict[int, int] = {}
        # KIP-890: producer id -> the epoch the coordinator added this partition for (leader only)
        self._verified: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> list[ProducerStateEntry]:
        """Every producer kept, least recently written first (Kafka's DescribeProducers)."""
        return list(self._producers.values())

    # -- leader checks ---------------------------------------------------------------------------

    def check(self, header: BatchHeader) -> Verdict:
        """The verdict for one batch against the current state; raises a `log.errors` error."""
        return self.check_batches((header,))[0]

    def check_batches(self, headers: Sequence[BatchHeader], *, coordinator: bool = False) -> tuple[Verdict, ...]:
        """Verdicts for the batches of one request, in order, each checked against the state as
        the batches before it would leave it. Raises on the first bad batch, changing nothing.
        `coordinator`: written by a coordinator for a producer (a group coordinator's
        transactional offset commit, Kafka's AppendOrigin.COORDINATOR): no sequences to check."""
        # producer id -> (epoch, last sequence, transaction open) as the batches so far leave it
        pending: dict[int, tuple[int, int, bool]] = {}
        verdicts: list[Verdict] = []
        for header in headers:
            pid = header.producer_id
            if pid < 0:
                verdicts.append(APPEND)
                continue
            if header.producer_epoch < 0 or (header.base_sequence < 0 and not coordinator):
                raise InvalidRecordError(
                    f"batch of producer {pid} has epoch {header.producer_epoch} and base sequence "
                    f"{header.base_sequence}; an idempotent batch needs both >= 0"
                )
            entry = self._producers.get(pid)
            if pid not in pending and entry is not None and not coordinator:
                duplicate = entry.find_duplicate(header)
                if duplicate is not None:
                    verdicts.append(duplicate)
                    continue
            state = pending.get(pid) or (
                (entry.producer_epoch, entry.last_sequence, entry.in_transaction)
                if entry is not None else None
            )
            open_txn = state is not None and state[2]
            if coordinator:
                if state is not None and header.producer_epoch < state[0]:
                    raise InvalidProducerEpochError(
                        f"producer {pid} epoch {header.producer_epoch} is fenced: the current epoch is {state[0]}")
            else:
                _check_sequence(header, None if state is None else state[:2], first=pid not in pending)
            if header.is_transactional and not (open_txn and state[0] == header.producer_epoch) \
                    and self._verified.get(pid) != header.producer_epoch:
                raise TxnNotVerifiedError(
                    f"producer {pid} epoch {header.producer_epoch} writes a transactional batch, but "
                    f"its transaction coordinator has not added this partition to a transaction "
                    f"(AddPartitionsToTxn)"
                )
            if open_txn and not header.is_transactional:
                raise InvalidTxnStateError(
                    f"producer {pid} has a transaction open in this partition: expected a "
                    f"transactional write"
                )
            pending[pid] = (header.producer_epoch, last_sequence(header),
                            open_txn or header.is_transactional)
            verdicts.append(APPEND)
        return tuple(verdicts)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Before a leader writes a transaction marker (Kafka's appendEndTxnMarker checks)."""
        if producer_id < 0 or producer_epoch < 0:
            raise InvalidRecordError(f"a transaction marker needs a producer id and epoch, got "
                                     f"{producer_id} and {producer_epoch}")
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"marker of producer {producer_id} epoch {producer_epoch} is fenced: the current "
                f"epoch is {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}")

    # -- transactions ----------------------------------------------------------------------------

    def verify_transaction(self, producer_id: int, producer_epoch: int) -> None:
        """KIP-890's partition-side hook: the coordinator added this partition to the open
        transaction of (producer id, epoch), so its first transactional batch may begin one
        here. In memory: a new leader has none until the coordinator sends it again
        (docs/transactions.md)."""
        self._verified.pop(producer_id, None)
        self._verified[producer_id] = producer_epoch
        while len(self._verified) > self.max_producers:
            del self._verified[next(iter(self._verified))]

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or of a completed one whose marker
        is not below the high watermark yet; None when there is none."""
        first = next(iter(self._ongoing), None)
        if self._unreplicated:
            unreplicated = min(self._unreplicated)
            return unreplicated if first is None else min(first, unreplicated)
        return first

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker the high watermark passed are stable."""
        if self._unreplicated:
            self._unreplicated = {f: m for f, m in self._unreplicated.items() if m >= high_watermark}

    def oldest_transaction_last_timestamp(self) -> int | None:
        """The last batch timestamp of the producer whose open transaction started first (Kafka's
        oldestTxnLastTimestamp: what KIP-664's late-transaction check ages); None: none open."""
        first = next(iter(self._ongoing.values()), None)
        return None if first is None else self._producers[first].last_timestamp

    def ongoing_transactions(self) -> dict[int, int]:
        """First offset -> producer id of every open transaction, oldest first."""
        return dict(self._ongoing)

    # -- state changes ---------------------------------------------------------------------------

    def update(self, header: BatchHeader, marker: EndTransactionMarker | None = None) -> CompletedTxn | None:
        """Records an appended batch (its header as stamped, with its offsets; a control batch
        with its decoded `marker`), unchecked: the leader checked it, and followers and recovery
        take what the log holds. Returns the transaction a marker completed, if it had data here."""
        pid = header.producer_id
        if pid < 0:
            return None
        entry = self._producers.pop(pid, None)
        if entry is None:
            entry = ProducerStateEntry(pid, header.producer_epoch, header.max_timestamp)
        elif header.producer_epoch != entry.producer_epoch:
            # a new epoch starts its sequences again; an open transaction stays open (its marker,
            # of the new epoch when the coordinator fenced the old one, ends it)
            entry.producer_epoch, entry.last_timestamp = header.producer_epoch, header.max_timestamp
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        completed = None
        if header.is_control:
            if marker is not None:
                completed = self._end_transaction(entry, header.base_offset, marker)
        else:
            entry.batches.append(BatchMetadata(
                header.base_sequence, last_sequence(header), header.base_offset, header.last_offset,
                header.max_timestamp,
            ))
            if header.is_transactional and not entry.in_transaction:
                entry.current_txn_first_offset = header.base_offset
                self._ongoing[header.base_offset] = pid
                self._verified.pop(pid, None)  # used up: the next transaction is verified again
        self._producers[pid] = entry
        self._evict()
        return completed

    def _end_transaction(self, entry: ProducerStateEntry, offset: int,
                         marker: EndTransactionMarker) -> CompletedTxn | None:
        entry.coordinator_epoch = marker.coordinator_epoch
        self._verified.pop(entry.producer_id, None)
        first = entry.current_txn_first_offset
        if first < 0:
            return None  # no data of it here: nothing for the index or the stable offset
        del self._ongoing[first]
        entry.current_txn_first_offset = NO_OFFSET
        self._unreplicated[first] = offset
        # Kafka's lastStableOffset(completedTxn): the next open transaction bounds it
        following = next(iter(self._ongoing), None)
        return CompletedTxn(entry.producer_id, first, offset, not marker.is_commit,
                            offset + 1 if following is None else following)

    def _evict(self) -> None:
        """Past max_producers, the least recently written producers without an open transaction go."""
        excess = len(self._producers) - self.max_producers
        if excess > 0:
            doomed = [pid for pid, e in self._producers.items() if not e.in_transaction][:excess]
            for pid in doomed:
                del self._producers[pid]

    def remove_expired(self, now_ms: int) -> int:
        """Forgets producers whose last batch timestamp is `producer_id_expiration_ms` old
        (Kafka's producer.id.expiration.ms); returns how many."""
        expired = [
            pid for pid, entry in self._producers.items()
            if not entry.in_transaction and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._verified.clear()

    # -- snapshots -------------------------------------------------------------------------------

    def snapshot(self) -> list[list[Any]]:
        """The state as builtins (msgpack-friendly), in eviction order: per producer its id,
        epoch, last timestamp, batches, open transaction's first offset (-1: none) and last
        coordinator epoch. The transactions completed above the high watermark are
        `unreplicated()`'s."""
        return [
            [e.producer_id, e.producer_epoch, e.last_timestamp,
             [[b.first_sequence, b.last_sequence, b.first_offset, b.last_offset, b.timestamp]
              for b in e.batches],
             e.current_txn_first_offset, e.coordinator_epoch]
            for e in self._producers.values()
        ]

    def unreplicated(self) -> list[list[int]]:
        """[first offset, marker offset] of the transactions completed by a marker the high
        watermark had not passed: a snapshot keeps them, so a restart that replays from it
        holds the last stable offset back as a replay of the whole log would."""
        return [[first, marker] for first, marker in self._unreplicated.items()]

    @classmethod
    def from_snapshot(
        cls, entries: list[list[Any]], producer_id_expiration_ms: int = 86_400_000,
        max_producers: int = MAX_PRODUCERS, unreplicated: list[list[int]] = (),  # type: ignore[assignment]
    ) -> ProducerStateManager:
        """Raises ValueError/TypeError on a malformed snapshot (the caller rebuilds instead)."""
        manager = cls(producer_id_expiration_ms, max_producers)
        ongoing = []
        for pid, epoch, last_timestamp, batches, *txn in entries:
            # a snapshot of a kraft before transactions has four fields per producer
            txn_first_offset, coordinator_epoch = map(int, txn) if txn else (NO_OFFSET, -1)
            if not batches and txn_first_offset < 0 and coordinator_epoch < 0:
                raise ValueError(f"producer {pid} has no batches in the snapshot")
            entry = ProducerStateEntry(int(pid), int(epoch), int(last_timestamp),
                                       coordinator_epoch=coordinator_epoch,
                                       current_txn_first_offset=max(NO_OFFSET, txn_first_offset))
            entry.batches.extend(BatchMetadata(*map(int, b)) for b in batches)
            manager._producers[entry.producer_id] = entry
            if entry.in_transaction:
                ongoing.append((entry.current_txn_first_offset, entry.producer_id))
        manager._ongoing = dict(sorted(ongoing))
        manager._unreplicated = {int(first): int(marker) for first, marker in unreplicated}
        return manager


def _check_sequence(header: BatchHeader, current: tuple[int, int] | None, first: bool) -> None:
    """`first`: the request's first batch of this producer; a refusal says whether it is `ahead`
    of the expected sequence (its predecessor could still come, in another request)."""
    pid, epoch, sequence = header.producer_id, header.producer_epoch, header.base_sequence
    if current is None:
        if sequence != 0:
            raise UnknownProducerIdError(
                f"producer {pid} is unknown to this partition (expired or never seen) and its "
                f"batch starts at sequence {sequence}, not 0", ahead=first,
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
                f"producer {pid} new epoch {epoch} must start at sequence 0, not {sequence}", ahead=first,
            )
        return
    expected = increment_sequence(current_last, 1)
    if sequence != expected:
        gap = (sequence - expected) % (INT32_MAX + 1)  # sequences wrap: ahead is the nearer half
        raise OutOfOrderSequenceError(
            f"producer {pid} epoch {epoch}: sequence {sequence} does not follow "
            f"{current_last} (expected {expected})", ahead=first and gap < (INT32_MAX + 1) // 2,
        )
"""The client side of idempotent produce (pure: no I/O, no threads), after the idempotent part of
Kafka's TransactionManager: the producer id and epoch, the next sequence of every partition, and
the epoch bump after a sequence error.

A batch gets its (producer id, epoch, base sequence) when it is first drained for sending and
keeps them (and its encoded bytes) for every retry, so the broker recognises a retry as a
duplicate. A sequence error (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID) on a batch that is
not the next one after the last acknowledged of its partition means an earlier batch is still on
its way (e.g. it went to a deposed leader): the batch is retried, as Kafka's client does. On the
next expected batch it means the broker lost or never had the producer's state: the batch fails
and the epoch is bumped locally, as Kafka's idempotent producer does since KIP-360, and so it is
when a batch holding sequences expires unsent. Every partition restarts at sequence 0 under the
new epoch (a broker accepts a higher epoch starting at 0). When the epoch would pass 32767 a new
producer id is needed (`producer` is None until the sender got one).
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.api.client.types import TopicPartition
from kraft.producer_ids import MAX_PRODUCER_EPOCH

# Requests in flight per leader: a broker recognises a retry among a producer's last 5 batches
# (log/producer_state.py's MAX_BATCHES_PER_PRODUCER; the client imports no broker code).
MAX_IN_FLIGHT_IDEMPOTENT = 5

INT32_MAX = 2**31 - 1
EPOCH_BUMP_ERRORS = frozenset({"OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID"})


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class BatchSequence:
    producer_id: int
    producer_epoch: int
    base_sequence: int


class IdempotenceState:
    def __init__(self) -> None:
        self.producer: ProducerIdAndEpoch | None = None
        self._next_sequence: dict[TopicPartition, int] = {}
        self._next_acked: dict[TopicPartition, int] = {}  # the sequence after the last acked

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A producer id from `POST /v1/producers/init`; sequences restart at 0."""
        assert producer_id >= 0 and 0 <= producer_epoch <= MAX_PRODUCER_EPOCH
        self.producer = ProducerIdAndEpoch(producer_id, producer_epoch)
        self._next_sequence.clear()
        self._next_acked.clear()

    def assign(self, tp: TopicPartition, record_count: int) -> BatchSequence:
        """The identity of `tp`'s next batch of `record_count` records (needs a producer id)."""
        assert self.producer is not None and record_count > 0
        base = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = _increment(base, record_count)
        return BatchSequence(self.producer.producer_id, self.producer.producer_epoch, base)

    def _is_current(self, batch: BatchSequence) -> bool:
        current = self.producer
        return current is not None and (batch.producer_id, batch.producer_epoch) == (
            current.producer_id, current.producer_epoch)

    def on_acked(self, tp: TopicPartition, batch: BatchSequence, record_count: int) -> None:
        """With several requests in flight a batch's answer may be handled after its
        successor's: the acknowledged sequence only moves forward."""
        if not self._is_current(batch):
            return
        end = _increment(batch.base_sequence, record_count)
        acked = self._next_acked.get(tp, 0)
        if (end - acked) % (INT32_MAX + 1) < (INT32_MAX + 1) // 2:
            self._next_acked[tp] = end

    def behind_unacked(self, tp: TopicPartition, batch: BatchSequence) -> bool:
        """Whether a batch sent now has an unacknowledged batch of its partition before it (kept
        on the batch at each send: see `should_retry`)."""
        return batch.base_sequence != self._next_acked.get(tp, 0)

    def should_retry(self, error_code: str, batch: BatchSequence, sent_behind_unacked: bool) -> bool:
        """A sequence error of a batch that was sent while an earlier batch of its partition was
        unacknowledged: it overtook that one (a deposed leader, another connection) and is
        retried, even when the earlier one's ack was handled before this answer. Judged at the
        send, not now: one sent as the next expected batch that gets a sequence error means the
        broker lost the producer's state."""
        return error_code in EPOCH_BUMP_ERRORS and self._is_current(batch) and sent_behind_unacked

    def on_error(self, error_code: str, batch: BatchSequence) -> None:
        """A batch failed for good: a sequence error bumps the epoch."""
        if error_code in EPOCH_BUMP_ERRORS:
            self.bump_epoch(batch)

    def bump_epoch(self, batch: BatchSequence) -> None:
        """A new epoch, unless `batch` was sent under an older one (so a burst of failures bumps
        once); sequences restart at 0."""
        current = self.producer
        if current is None or not self._is_current(batch):
            return
        self._next_sequence.clear()
        self._next_acked.clear()
        if current.producer_epoch >= MAX_PRODUCER_EPOCH:
            self.producer = None  # exhausted: the sender fetches a new producer id
        else:
            self.producer = ProducerIdAndEpoch(current.producer_id, current.producer_epoch + 1)


def _increment(sequence: int, count: int) -> int:
    """Sequences wrap from INT32_MAX to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - count:
        return count - (INT32_MAX - sequence) - 1
    return sequence + count

"""The client side of idempotent produce (pure: no I/O, no threads), after the idempotent part of
Kafka's TransactionManager: the producer id and epoch, the next sequence of every partition, and
the epoch bump after a sequence error.

A batch gets its (producer id, epoch, base sequence) when it is first drained for sending and
keeps them (and its encoded bytes) for every retry, so the broker recognises a retry as a
duplicate. After OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID (the broker lost or never had
the producer's state) the failed batch is reported to the application and the epoch is bumped
locally, as Kafka's idempotent producer does since KIP-360: every partition restarts at sequence 0
under the new epoch (a broker accepts a higher epoch starting at 0). When the epoch would pass
32767 a new producer id is needed (`producer` is None until the sender got one).
"""

from __future__ import annotations

from dataclasses import dataclass

from api.client.types import TopicPartition
from api.producer_ids import MAX_PRODUCER_EPOCH

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

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A producer id from `POST /v1/producers/init`; sequences restart at 0."""
        assert producer_id >= 0 and 0 <= producer_epoch <= MAX_PRODUCER_EPOCH
        self.producer = ProducerIdAndEpoch(producer_id, producer_epoch)
        self._next_sequence.clear()

    def assign(self, tp: TopicPartition, record_count: int) -> BatchSequence:
        """The identity of `tp`'s next batch of `record_count` records (needs a producer id)."""
        assert self.producer is not None and record_count > 0
        base = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = _increment(base, record_count)
        return BatchSequence(self.producer.producer_id, self.producer.producer_epoch, base)

    def on_error(self, error_code: str, batch: BatchSequence) -> None:
        """Bumps the epoch after a sequence error of a batch sent under the current epoch (so a
        burst of failures of older batches bumps once)."""
        current = self.producer
        if (
            error_code not in EPOCH_BUMP_ERRORS
            or current is None
            or (batch.producer_id, batch.producer_epoch) != (current.producer_id, current.producer_epoch)
        ):
            return
        self._next_sequence.clear()
        if current.producer_epoch >= MAX_PRODUCER_EPOCH:
            self.producer = None  # exhausted: the sender fetches a new producer id
        else:
            self.producer = ProducerIdAndEpoch(current.producer_id, current.producer_epoch + 1)


def _increment(sequence: int, count: int) -> int:
    """Sequences wrap from INT32_MAX to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - count:
        return count - (INT32_MAX - sequence) - 1
    return sequence + count

"""Storage-layer exceptions, each carrying `error_code`: the Kafka error name the HTTP layer maps
(see `api.errors.from_exception`). `log/` imports nothing of `api/`, so the names are plain strings."""

from __future__ import annotations


class LogError(Exception):
    """Base of every storage error; `error_code` is a Kafka error name."""

    error_code = "UNKNOWN_SERVER_ERROR"


class CorruptRecordError(LogError):
    """Bad batch framing: length, magic, CRC, or an undecodable payload."""

    error_code = "CORRUPT_MESSAGE"


class OffsetOutOfRangeError(LogError):
    """A fetch offset outside [log_start_offset, log_end_offset]."""

    error_code = "OFFSET_OUT_OF_RANGE"


class RecordTooLargeError(LogError):
    """A batch larger than max.message.bytes (or than a segment can hold)."""

    error_code = "MESSAGE_TOO_LARGE"


class InvalidRecordError(LogError):
    """A well-framed batch whose contents break the rules (record count, offsets, compression)."""

    error_code = "INVALID_RECORD"


class InvalidTimestampError(LogError):
    """A timestamp outside what the topic accepts."""

    error_code = "INVALID_TIMESTAMP"


class KafkaStorageError(LogError):
    """The log directory cannot be read or written (I/O error, missing files)."""

    error_code = "KAFKA_STORAGE_ERROR"


class SequenceError(LogError):
    """An idempotent batch refused by its producer's sequence state. `ahead`: the batch starts past
    the sequence the partition expects next, so its predecessor may still be on its way (sent
    on another connection): the leader may wait for it before refusing (docs/idempotence.md)."""

    def __init__(self, message: str, *, ahead: bool = False) -> None:
        super().__init__(message)
        self.ahead = ahead


class OutOfOrderSequenceError(SequenceError):
    """An idempotent producer's batch does not continue its sequence (a batch was lost)."""

    error_code = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(LogError):
    """A batch from an older epoch of a producer id: a fenced (zombie) writer."""

    error_code = "INVALID_PRODUCER_EPOCH"


class UnknownProducerIdError(SequenceError):
    """A producer the partition has no state for sent a batch not starting at sequence 0."""

    error_code = "UNKNOWN_PRODUCER_ID"


class InvalidTxnStateError(LogError):
    """A transactional write the partition cannot take: a batch of a transaction the coordinator
    has not added this partition to (KIP-890), or a plain batch while its producer's transaction
    is open here."""

    error_code = "INVALID_TXN_STATE"


class TxnNotVerifiedError(InvalidTxnStateError):
    """A transactional batch that would begin a transaction here without its coordinator's
    verification (KIP-890). A leader that took over recently answers a retriable error instead:
    the coordinator sends the verification again to a new leader (docs/transactions.md)."""


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from a coordinator epoch older than one this partition has seen."""

    error_code = "TRANSACTION_COORDINATOR_FENCED"

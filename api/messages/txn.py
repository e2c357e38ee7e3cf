"""The partition side of transactions, for the transaction coordinator (node-only routes): Kafka's
WriteTxnMarkers (`POST /v1/partitions/txn-markers`), and the verification KIP-890 asks of a
partition before it takes a transaction's first batch (`POST /v1/partitions/txn-verify`, what the
coordinator's AddPartitionsToTxn tells each partition leader). Every partition is answered on its
own, with `error_code`/`message` when it failed."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from kraft.api.messages.common import (
    INT32_MAX, INT64_MAX, Message, PartitionNumber, TimeoutMs, TopicName, check_topic_name,
)

MAX_MARKERS_PER_REQUEST = 10_000
ProducerId = Annotated[int, Meta(ge=0, le=INT64_MAX)]
ProducerEpoch = Annotated[int, Meta(ge=0, le=2**15 - 1)]
CoordinatorEpoch = Annotated[int, Meta(ge=0, le=INT32_MAX)]


class TxnTopicPartition(Message, forbid_unknown_fields=True):
    topic: TopicName
    partition: PartitionNumber

    def __post_init__(self) -> None:
        check_topic_name(self.topic)


class TxnMarker(Message, forbid_unknown_fields=True):
    """Ends `producer_id`'s transaction in each partition: a COMMIT or ABORT control record."""

    producer_id: ProducerId
    producer_epoch: ProducerEpoch
    coordinator_epoch: Annotated[CoordinatorEpoch, Meta(
        description="a marker from an older coordinator epoch than one the partition has seen is "
                    "refused TRANSACTION_COORDINATOR_FENCED")]
    transaction_result: Literal["COMMIT", "ABORT"]
    partitions: Annotated[list[TxnTopicPartition], Meta(min_length=1, max_length=MAX_MARKERS_PER_REQUEST)]


class WriteTxnMarkersRequest(Message, forbid_unknown_fields=True):
    """Kafka's WriteTxnMarkers, to the leader of every partition named (acks=all: each partition
    is answered once its high watermark passed the marker, or with REQUEST_TIMED_OUT)."""

    timeout_ms: TimeoutMs = 30_000
    markers: Annotated[list[TxnMarker], Meta(min_length=1, max_length=MAX_MARKERS_PER_REQUEST)]


class TxnPartitionResult(Message):
    topic: str
    partition: int
    offset: int | None = None  # a marker's offset
    error_code: str | None = None
    message: str | None = None


class TxnMarkerResult(Message):
    producer_id: int
    partitions: list[TxnPartitionResult]


class WriteTxnMarkersResponse(Message):
    markers: list[TxnMarkerResult]


class VerifyTransactionRequest(Message, forbid_unknown_fields=True):
    """The coordinator added these partitions to (producer id, epoch)'s open transaction: their
    leaders take its first transactional batch (KIP-890), which they refuse INVALID_TXN_STATE
    otherwise."""

    producer_id: ProducerId
    producer_epoch: ProducerEpoch
    partitions: Annotated[list[TxnTopicPartition], Meta(min_length=1, max_length=MAX_MARKERS_PER_REQUEST)]


class VerifyTransactionResponse(Message):
    partitions: list[TxnPartitionResult]

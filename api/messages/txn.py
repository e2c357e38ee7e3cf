"""The partition side of transactions, for the transaction coordinator (node-only routes): Kafka's
WriteTxnMarkers (`POST /v1/partitions/txn-markers`), and the verification KIP-890 asks of a
partition before it takes a transaction's first batch (`POST /v1/partitions/txn-verify`, what the
coordinator's AddPartitionsToTxn tells each partition leader). Every partition is answered on its
own, with `error_code`/`message` when it failed."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from kraft.api.messages.groups import CommittedOffset
from kraft.api.messages.common import (
    INT32_MAX, INT64_MAX, GroupId, Message, Node, PartitionNumber, TimeoutMs, TopicName, TransactionalId,
    check_topic_name,
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


# -- the transaction coordinator's client APIs (api/routes/transactions.py) -------------------

TransactionTimeoutMs = Annotated[int, Meta(ge=1, le=INT32_MAX)]


class InitTransactionRequest(Message, forbid_unknown_fields=True):
    """Kafka's InitProducerId with a transactional id."""

    transaction_timeout_ms: Annotated[TransactionTimeoutMs, Meta(
        description="an open transaction older than this is aborted by the coordinator "
                    "(at most transaction.max.timeout.ms)")] = 60_000


class TransactionProducer(Message, forbid_unknown_fields=True):
    producer_id: ProducerId
    producer_epoch: ProducerEpoch


class AddPartitionsToTxnRequest(TransactionProducer, forbid_unknown_fields=True):
    partitions: Annotated[list[TxnTopicPartition], Meta(min_length=1, max_length=MAX_MARKERS_PER_REQUEST)]


class AddPartitionsToTxnResponse(Message):
    partitions: list[TxnPartitionResult]


class AddOffsetsToTxnRequest(TransactionProducer, forbid_unknown_fields=True):
    group_id: GroupId


class EndTxnRequest(TransactionProducer, forbid_unknown_fields=True):
    commit: Annotated[bool, Meta(description="true: commit, false: abort")]


class TxnOffsetCommitEntry(Message, forbid_unknown_fields=True):
    topic: TopicName
    partition: PartitionNumber
    offset: Annotated[int, Meta(ge=0, le=INT64_MAX)]
    metadata: Annotated[str, Meta(max_length=4096)] = ""


class TxnOffsetCommitRequest(TransactionProducer, forbid_unknown_fields=True):
    """Kafka's TxnOffsetCommit: the group sees the offsets once the transaction commits."""

    transactional_id: TransactionalId
    offsets: Annotated[list[TxnOffsetCommitEntry], Meta(min_length=1, max_length=MAX_MARKERS_PER_REQUEST)]


class TxnOffsetCommitResponse(Message):
    """Each offset's answer (Kafka's TxnOffsetCommit): `error_code` set when it was not added
    (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, or the group's error beside those)."""

    offsets: list[CommittedOffset]


class TransactionDescription(Message):
    """Kafka's DescribeTransactions state (kafka-transactions.sh describe's columns)."""

    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1: no open transaction
    topic_partitions: list[TxnTopicPartition]


class ListTransactionsResponse(Message):
    transactions: list[TransactionDescription]


class ProducerState(Message):
    """Kafka's DescribeProducers entry of an active producer of a partition."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction


class DescribeProducersResponse(Message):
    topic: str
    partition: int
    producers: list[ProducerState]


class DescribeProducersRequest(Message, forbid_unknown_fields=True):
    """Kafka's DescribeProducers for many partitions, answered by the broker asked: the ones it
    leads (the others answer NOT_LEADER_OR_FOLLOWER)."""

    partitions: Annotated[list[TxnTopicPartition], Meta(min_length=1, max_length=MAX_MARKERS_PER_REQUEST)]


class PartitionProducersResult(Message):
    topic: str
    partition: int
    producers: list[ProducerState]
    error_code: str | None = None
    message: str | None = None


class DescribeProducersManyResponse(Message):
    partitions: list[PartitionProducersResult]


class AbortTransactionRequest(Message, forbid_unknown_fields=True):
    """Kafka's Admin.abortTransaction (kafka-transactions.sh abort): an ABORT marker for the open
    transaction of `producer_id` in one partition (a hanging transaction no coordinator ends)."""

    producer_id: ProducerId
    producer_epoch: ProducerEpoch
    coordinator_epoch: Annotated[CoordinatorEpoch, Meta(
        description="at least the partition's LatestCoordinatorEpoch (DescribeProducers; 0 when it is -1)")] = 0
    timeout_ms: TimeoutMs = 30_000


class AbortTransactionResponse(Message):
    topic: str
    partition: int
    offset: int | None  # the marker's (None for a __consumer_offsets partition: its coordinator wrote it)


class FindTransactionCoordinatorResponse(Message):
    transactional_id: str
    partition: int  # of __transaction_state
    coordinator: Node


class TransactionAck(Message):
    """Done (AddOffsetsToTxn and EndTxn answer nothing else)."""

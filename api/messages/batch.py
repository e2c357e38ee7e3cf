"""The batch routes' messages (`POST /v1/produce`, `POST /v1/fetch`), the clients' and followers'
hot path: records travel as Kafka record batches (bin in msgpack, base64 in JSON), and every
partition is answered on its own, with `error_code`/`message` when it failed.

Decoding is one msgspec pass; the per-partition Python work is the topic name check."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from kraft.api.messages.common import (
    INT32_MAX, INT64_MAX, READ_UNCOMMITTED, Acks, Binary, BrokerEpoch, Epoch, IsolationLevel, Message, Node,
    NonNegativeInt64, PartitionNumber, TimeoutMs, TopicName, TransactionalId, check_topic_name, parse_acks,
)
from kraft.server.records import NO_EPOCH, NO_REPLICA

MAX_PARTITIONS_PER_REQUEST = 10_000
DEFAULT_FETCH_MAX_BYTES = 52_428_800
DEFAULT_PARTITION_MAX_BYTES = 1_048_576

# A memoryview into the request body (msgpack: no copy; a writable one when the body is a
# bytearray, which the log then stamps in place: docs/benchmarks.md, the 1 KiB path).
RecordBatches = Annotated[memoryview, Meta(
    description="one or more Kafka record batches (v2), each with a valid CRC",
    extra_json_schema={"minLength": 84})]  # base64 of one 61-byte batch header
ByteCount = Annotated[int, Meta(ge=1, le=INT32_MAX)]


class ProducePartition(Message):
    topic: TopicName
    partition: PartitionNumber
    records: RecordBatches

    def __post_init__(self) -> None:
        check_topic_name(self.topic, "produce to")


class ProduceRequest(Message):
    """All or nothing before any append: every batch's framing and CRC are checked first."""

    acks: Acks = -1
    timeout_ms: TimeoutMs = 30_000
    partitions: Annotated[list[ProducePartition], Meta(max_length=MAX_PARTITIONS_PER_REQUEST)]
    transactional_id: Annotated[TransactionalId | None, Meta(
        description="a transactional producer's id (Kafka's Produce transactional_id): transactional batches "
                    "need it, and the principal needs Write on it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED "
                    "and nothing is appended")] = None

    def __post_init__(self) -> None:
        self.acks = parse_acks(self.acks)


class ProducePartitionResponse(Message):
    topic: str
    partition: int
    base_offset: int
    log_start_offset: int
    error_code: str | None = None
    message: str | None = None
    log_append_time: Annotated[int, Meta(description="the broker's time stamped on the records of a topic with "
                                                     "message.timestamp.type=LogAppendTime (-1: CreateTime)")] = -1


class ProduceResponse(Message):
    partitions: list[ProducePartitionResponse]
    throttle_time_ms: Annotated[int, Meta(description="how long the answer was held back for a client quota")]


class FetchPartition(Message):
    topic: TopicName
    partition: PartitionNumber
    fetch_offset: NonNegativeInt64
    partition_max_bytes: ByteCount = DEFAULT_PARTITION_MAX_BYTES
    current_leader_epoch: Annotated[Epoch, Meta(
        description="the leader epoch the fetcher believes current (KIP-320): older than the broker's -> "
                    "FENCED_LEADER_EPOCH, newer -> UNKNOWN_LEADER_EPOCH; -1: unchecked")] = NO_EPOCH
    last_fetched_epoch: Annotated[Epoch, Meta(
        description="the epoch of the follower's last batch: the leader answers diverging_epoch when "
                    "its log differs; -1: none")] = NO_EPOCH
    high_watermark: Annotated[int, Meta(
        ge=-1, le=INT64_MAX, description="the follower's own high watermark: the leader answers at once "
                                         "when its own is newer; -1: unknown")] = -1
    log_start_offset: Annotated[int, Meta(
        ge=-1, le=INT64_MAX, description="the follower's own log start offset (DeleteRecords waits until "
                                         "every live replica's reaches its offset); -1: unknown")] = -1

    def __post_init__(self) -> None:
        check_topic_name(self.topic)


class FetchRequest(Message):
    """A consumer's fetch, or with `replica_id` (or leader epochs) a follower's (KIP-320/595/903)."""

    max_wait_ms: TimeoutMs = 500
    min_bytes: Annotated[int, Meta(ge=0, le=INT32_MAX)] = 1
    max_bytes: ByteCount = DEFAULT_FETCH_MAX_BYTES
    replica_id: Annotated[int, Meta(
        ge=NO_REPLICA, le=INT32_MAX, description="the fetching broker's id (a follower); -1 or absent: a "
                                                 "consumer, which reads below the high watermark only")] = NO_REPLICA
    replica_epoch: Annotated[BrokerEpoch, Meta(
        description="the follower's broker epoch (KIP-903): an older incarnation gets STALE_BROKER_EPOCH; "
                    "-1: unchecked")] = -1
    isolation_level: IsolationLevel = READ_UNCOMMITTED
    partitions: Annotated[list[FetchPartition], Meta(max_length=MAX_PARTITIONS_PER_REQUEST)]


class DivergingEpoch(Message):
    """The leader's end offset of the largest epoch <= last_fetched_epoch: truncate there."""

    epoch: int
    end_offset: int


class AbortedTransaction(Message):
    """Kafka's FetchResponse AbortedTransaction: a reader drops this producer's transactional
    batches from `first_offset` until its ABORT marker."""

    producer_id: int
    first_offset: int


class FetchPartitionResponse(Message):
    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    records: Binary
    last_stable_offset: Annotated[int | None, Meta(
        description="the offset below which no transaction is open (read_committed reads stop there)")] = None
    aborted_transactions: Annotated[list[AbortedTransaction] | None, Meta(
        description="read_committed only: the aborted transactions the records overlap")] = None
    log_end_offset: Annotated[int | None, Meta(description="replica fetches only: the leader's log end offset")] = None
    diverging_epoch: Annotated[DivergingEpoch | None, Meta(
        description="replica fetches only, instead of records: the follower's log diverged")] = None
    error_code: str | None = None
    message: str | None = None
    leader: Annotated[Node | None, Meta(
        description="with NOT_LEADER_OR_FOLLOWER: the partition's leader as this broker knows it")] = None


class FetchResponse(Message):
    throttle_time_ms: Annotated[int, Meta(description="how long the answer was held back for a client quota")]
    partitions: list[FetchPartitionResponse]


class ReplicationQuery(Message):
    replica_id: Annotated[int, Meta(ge=0, le=INT32_MAX, description="the following broker's id")]


class ReplicationFetch(Message):
    """One message a follower sends on its replication channel: a replica fetch, numbered."""

    id: Annotated[int, Meta(ge=0, description="echoed in the answer")]
    fetch: FetchRequest


class ReplicationAnswer(Message):
    """The leader's answer to the fetch numbered `id`: the fetch answer, or the request's error
    (a fetch refused as a whole, e.g. another replica's id: the channel stays open)."""

    id: int
    fetch: FetchResponse | None = None
    error_code: str | None = None
    message: str | None = None

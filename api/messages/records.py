"""The JSON convenience routes' records: produce records to a topic, read a partition from an
offset, a partition's offsets, and delete the records before an offset (DeleteRecords).

A key, value or header value is text (UTF-8), null, or with `key_b64`/`value_b64` base64; in a
msgpack body or answer it may be bin. Records are strict about their fields: a misspelt `valeu`
would otherwise store a null value.
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import UNSET, Meta, UnsetType

from kraft.api.messages.common import (
    INT32_MAX, READ_UNCOMMITTED, Acks, Binary, Int64, IsolationLevel, Message, NonNegativeInt64, PartitionNumber,
    TimeoutMs, TopicName, check_topic_name, parse_acks,
)

MAX_RECORDS_PER_REQUEST = 100_000
MAX_FETCH_RECORDS = 10_000
MAX_DELETE_PARTITIONS = 10_000
DEFAULT_FETCH_BYTES = 1024 * 1024

# Text in JSON; text or bin in msgpack (msgspec has no type that is both), checked by the route.
RecordData = Annotated[Any, Meta(description="UTF-8 text or null (bin in msgpack)",
                                 extra_json_schema={"anyOf": [{"type": "string"}, {"type": "null"}]})]


class HeaderIn(Message, forbid_unknown_fields=True):
    key: str
    value: RecordData = None


class RecordIn(Message, forbid_unknown_fields=True):
    """One record: `key`/`value` as text, or `key_b64`/`value_b64`; partition chosen by the key's
    murmur2 hash (as Kafka's producer) when absent, timestamp now when absent."""

    key: RecordData = None
    value: RecordData = None
    key_b64: Binary | None = None
    value_b64: Binary | None = None
    partition: PartitionNumber | None = None
    timestamp: NonNegativeInt64 | None = None
    headers: dict[str, RecordData] | list[HeaderIn] | None = None


class ProduceRecordsQuery(Message):
    acks: Annotated[str, Meta(extra_json_schema={"enum": ["0", "1", "-1", "all"]})] = "all"


class ProduceRecordsRequest(Message):
    """`acks` here wins over the query's."""

    records: Annotated[list[RecordIn], Meta(min_length=1, max_length=MAX_RECORDS_PER_REQUEST)]
    acks: Acks | None = None

    def __post_init__(self) -> None:
        if self.acks is not None:
            self.acks = parse_acks(self.acks)


class RecordOffset(Message):
    """Where a record went; with the partition's error when it was not stored."""

    partition: int
    offset: int | None
    error_code: str | None = None
    message: str | None = None
    retriable: bool | None = None


class ProducedPartition(Message):
    partition: int
    base_offset: int | None
    record_count: int
    error_code: str | None = None
    message: str | None = None
    retriable: bool | None = None


class ProduceRecordsResponse(Message):
    offsets: list[RecordOffset]
    partitions: list[ProducedPartition]


PRODUCE_ANSWER = (
    "Records go to their partitions (each partition's leader, forwarded when another broker leads "
    "it), and every partition is answered on its own, as Kafka's ProduceResponse: `partitions` holds "
    "one entry per partition written to, with `base_offset` when its records were stored or "
    "`error_code`, `message` and `retriable` when they were not; `offsets` says the same per record, "
    "in request order. 200 when at least one partition stored its records: check every entry, and "
    "retry only the failed partitions (a retry of the stored ones would duplicate them). When no "
    "partition stored anything, the answer is the first partition's error with its status (e.g. 503 "
    "KAFKA_STORAGE_ERROR), carrying the same `partitions` list. Invalid input is refused before "
    "anything is written (400).")


class FetchRecordsQuery(Message):
    offset: Annotated[str, Meta(pattern="^(earliest|latest|[0-9]{1,18})$",
                                description="an offset, earliest (default) or latest")] = "earliest"
    timestamp: Annotated[NonNegativeInt64 | None, Meta(description="start at the first record this late")] = None
    max_records: Annotated[int, Meta(ge=1, le=MAX_FETCH_RECORDS)] = 100
    max_bytes: Annotated[int, Meta(ge=1, le=INT32_MAX, description=(
        "decoded keys, values and headers in the answer at most (and fetch.max.bytes); at least one record"))
    ] = DEFAULT_FETCH_BYTES
    timeout_ms: Annotated[TimeoutMs, Meta(description="long-poll time when nothing is new")] = 0
    isolation_level: IsolationLevel = READ_UNCOMMITTED


class Header(Message):
    """`value` is text when it is UTF-8, else null with `value_b64`; bin in msgpack."""

    key: str
    value: str | None
    value_b64: str | None = None


class RecordOut(Message):
    """`key`/`value` are text when UTF-8, else null with `key_b64`/`value_b64`; bin in msgpack."""

    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: str | None
    headers: list[Header]
    key_b64: str | None = None
    value_b64: str | None = None


class FetchRecordsResponse(Message):
    """`next_offset` is where to read next: past the records answered, and past transaction markers
    and aborted records (read_committed) that were left out."""

    records: list[RecordOut]
    high_watermark: int
    log_start_offset: int
    next_offset: int
    last_stable_offset: int | None = None


class PartitionOffsetsQuery(Message):
    timestamp: NonNegativeInt64 | None = None
    isolation_level: Annotated[IsolationLevel, Meta(description=(
        "read_committed: a timestamp lookup answers only offsets below the last stable offset (Kafka's "
        "ListOffsets; its latest is `last_stable_offset`)"))] = READ_UNCOMMITTED


class PartitionOffsetsResponse(Message):
    """With `?timestamp=`, also the first offset at or after it (null, null when none is).
    `last_stable_offset` is latest for read_committed readers (no transaction open below it)."""

    partition: int
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    last_stable_offset: int = -1
    offset: int | None | UnsetType = UNSET
    timestamp: int | None | UnsetType = UNSET


class DeleteRecordsPartition(Message, forbid_unknown_fields=True):
    topic: TopicName
    partition: PartitionNumber
    offset: Annotated[Int64, Meta(
        description="delete the records before this offset (the partition's new log start offset); -1: the "
                    "high watermark. Above the high watermark, or below -1: OFFSET_OUT_OF_RANGE")]

    def __post_init__(self) -> None:
        check_topic_name(self.topic)


class DeleteRecordsRequest(Message, forbid_unknown_fields=True):
    """Kafka's DeleteRecords (kafka-delete-records, Admin.deleteRecords): each partition's leader
    moves its log start offset, then answers once every live replica's reached it."""

    timeout_ms: Annotated[TimeoutMs, Meta(
        description="how long to wait for the replicas (else REQUEST_TIMED_OUT for that partition)")] = 30_000
    partitions: Annotated[list[DeleteRecordsPartition], Meta(min_length=1, max_length=MAX_DELETE_PARTITIONS)]


class DeletedRecordsPartition(Message):
    """`low_watermark`: the smallest log start offset of the live replicas (-1 with an error)."""

    topic: str
    partition: int
    low_watermark: int
    error_code: str | None = None
    message: str | None = None


class DeleteRecordsResponse(Message):
    partitions: list[DeletedRecordsPartition]

"""One model of produce and fetch for every listener (Kafka's ProduceResponse / FetchResponse
partition data), and the replica manager's interface that the record services call.

A produce names batches per partition (`ProduceEntry`) and gets one `ProducePartitionResult`
each; a fetch, whether a consumer's (`replica_id` NO_REPLICA: below the high watermark) or a
follower's (up to the log end, recording its position), names `FetchEntry`s and gets one
`FetchPartitionResult` each, carrying the stored batches as they are (no copy is made to answer).
Per-partition failures are Kafka's error names in `error_code` with a human `message`, as Kafka
answers each partition on its own. A read_committed fetch (`FetchEntry.read_committed`) stops at
the last stable offset and answers the aborted transactions its batches overlap (Kafka's
FetchResponse fields; docs/transactions.md). The fields Kafka's answers have and kraft has no use
for yet (a preferred read replica, per-record errors) are there with their default values, so
listeners encode them now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, Sequence

NO_REPLICA = -1  # a consumer's fetch (Kafka's replica_id -1)
NO_EPOCH = -1  # no leader epoch given: unchecked
NO_PREFERRED_READ_REPLICA = -1  # KIP-392: read from the leader
EARLIEST_TIMESTAMP = -2  # Kafka's ListOffsets timestamps for the log start and the high watermark
LATEST_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class ProduceEntry:
    topic: str
    partition: int
    records: bytes  # one or more concatenated batches


class RecordError(NamedTuple):
    """Kafka's per-record error of a produce (KIP-467): the record's index in its batch."""

    batch_index: int
    message: str


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    topic: str
    partition: int
    base_offset: int  # -1 on error or acks=0
    log_start_offset: int
    error_code: str | None = None
    message: str | None = None
    log_append_time: int = -1  # -1: the producer's timestamps were kept (CreateTime)
    record_errors: tuple[RecordError, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchEntry:
    """A partition of a fetch. A follower also names the leader epoch it believes current
    (KIP-320: FENCED_LEADER_EPOCH when older than the broker's, UNKNOWN_LEADER_EPOCH when newer),
    the epoch of its last batch (the answer carries a diverging epoch when its log went its own
    way), and its own high watermark and log start offset (the leader answers at once when its
    own moved past them)."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH
    high_watermark: int = -1  # the follower's own
    log_start_offset: int = -1  # the follower's own (the leader's low watermark counts it)
    read_committed: bool = False  # isolation_level=read_committed: up to the last stable offset

    @property
    def names_epochs(self) -> bool:
        return self.current_leader_epoch != NO_EPOCH or self.last_fetched_epoch != NO_EPOCH


class DivergingEpoch(NamedTuple):
    """The leader's end offset of the largest epoch <= the follower's last fetched epoch."""

    epoch: int
    end_offset: int


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    records: bytes  # stored batches as they are on disk
    diverging_epoch: DivergingEpoch | None = None  # replica fetches only, instead of records
    error_code: str | None = None
    message: str | None = None
    leader: dict[str, Any] | None = None  # {node_id, host, port} with NOT_LEADER_OR_FOLLOWER
    last_stable_offset: int = -1  # below the oldest open transaction; the high watermark when none
    aborted_transactions: tuple[AbortedTransaction, ...] = ()  # read_committed: those the records overlap
    preferred_read_replica: int = NO_PREFERRED_READ_REPLICA


@dataclass(frozen=True, slots=True)
class DeleteRecordsEntry:
    topic: str
    partition: int
    offset: int  # the new log start offset; -1: the high watermark


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    topic: str
    partition: int
    low_watermark: int  # -1 on error
    error_code: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    last_stable_offset: int = -1  # latest for read_committed readers (and their group's lag)


class EpochEndOffset(NamedTuple):
    """OffsetForLeaderEpoch's answer: the largest epoch <= the one asked and where it ends."""

    leader_epoch: int
    end_offset: int


class ReplicaService(Protocol):
    """The replica manager (`kraft/broker/replica_manager.py`): the partitions this broker leads."""

    async def produce(
        self, entries: Sequence[ProduceEntry], acks: int, timeout_ms: int
    ) -> list[ProducePartitionResult]: ...

    async def replica_fetch(
        self, replica_id: int, replica_epoch: int, entries: Sequence[FetchEntry],
        max_wait_ms: int, min_bytes: int, max_bytes: int,
    ) -> list[FetchPartitionResult]:
        """A consumer's fetch (`replica_id` NO_REPLICA) or a follower's (KIP-903's `replica_epoch`)."""

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets: ...

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int, read_committed: bool = False
    ) -> tuple[int, int] | None:
        """The first record at or after `timestamp` below the high watermark (read_committed: the
        last stable offset)."""
        ...

    async def offset_for_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset: ...

    async def delete_records(
        self, entries: Sequence[DeleteRecordsEntry], timeout_ms: int
    ) -> list[DeleteRecordsResult]: ...


class ProducerIdService(Protocol):
    """Producer ids from the blocks the active controller allocates to this broker
    (`kraft/broker/producer_ids.py`)."""

    async def allocate_producer_id(self) -> int: ...

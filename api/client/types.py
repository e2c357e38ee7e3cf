"""The value types of the client API: topic-partitions, record metadata, consumed records, and the
admin client's descriptions. NamedTuples on the hot paths (cheap to build, hashable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kraft.api.errors import KraftError

Headers = tuple[tuple[str, bytes | None], ...]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """What a producer future resolves to. offset is -1 with acks=0 (the broker does not answer)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


class ConsumerGroupMetadata(NamedTuple):
    """Kafka's ConsumerGroupMetadata: what `Producer.send_offsets_to_transaction` takes."""

    group_id: str
    generation_id: int = -1  # the member epoch (KIP-848)
    member_id: str = ""


class OffsetAndMetadata(NamedTuple):
    """A committed position as kafka-python (2.x) names it: the next offset to read, the
    application's string stored with it, and the leader epoch (-1: unknown; not stored here)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class DeletedRecords(NamedTuple):
    """One partition's answer to `Admin.delete_records` (Kafka's DeletedRecords): the low
    watermark, the smallest log start offset of its live replicas; -1 with `error`."""

    low_watermark: int
    error: KraftError | None = None


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


@dataclass(frozen=True)
class NewTopic:
    """kafka-python's NewTopic for `Admin.create_topics`; -1 (or None) takes the broker default."""

    name: str
    num_partitions: int | None = -1
    replication_factor: int | None = -1
    replica_assignments: dict[int, list[int]] | None = None
    topic_configs: dict[str, str] | None = None


@dataclass(frozen=True)
class NewPartitions:
    """kafka-python's NewPartitions for `Admin.create_partitions`: the new total count."""

    total_count: int
    new_assignments: list[list[int]] | None = None


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int | None  # None when the partition has no leader (offline)
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicListing:
    name: str
    topic_id: str
    internal: bool
    partitions: int


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int | None
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True)
class PartitionOffsets:
    """The answer of `Admin.list_offsets` for one partition; `offset`/`timestamp` are set for a
    timestamp lookup (None when no record is that late) and equal the requested end otherwise."""

    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    offset: int | None
    timestamp: int | None


def partition_info_from_wire(p: dict) -> PartitionInfo:
    leader = p.get("leader")
    return PartitionInfo(
        partition=int(p["partition"]),
        leader=None if leader is None or leader < 0 else int(leader),
        leader_epoch=int(p.get("leader_epoch", -1)),
        replicas=tuple(p.get("replicas", ())),
        isr=tuple(p.get("isr", ())),
    )

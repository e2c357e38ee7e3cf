"""The small interfaces the HTTP routes call, and the AppKeys that inject their implementations.

The node (`kraft/`) implements them: `ReplicaService` is the broker's replica manager,
`AdminService` talks to the active controller, `MetadataView` reads the broker's metadata image.
The routes import nothing of `kraft/`, so they can be tested against any implementation. Values
crossing the seam are small frozen dataclasses named after the API answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

from aiohttp import web


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    roles: tuple[str, ...]
    max_request_bytes: int
    auto_create_topics: bool
    fetch_max_bytes: int  # the broker's fetch.max.bytes: what one fetch answer holds at most


@dataclass(frozen=True)
class BrokerDescription:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionDescription, ...]
    configs: Mapping[str, str]  # the topic's overrides


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int  # -1 when unknown
    brokers: tuple[BrokerDescription, ...]


@dataclass(frozen=True)
class ProduceEntry:
    topic: str
    partition: int
    records: bytes  # one or more concatenated batches


@dataclass(frozen=True)
class ProduceResult:
    topic: str
    partition: int
    base_offset: int  # -1 on error or acks=0
    log_start_offset: int
    error_code: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class FetchEntry:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    read_committed: bool = False  # isolation_level=read_committed: up to the last stable offset


@dataclass(frozen=True)
class FetchResult:
    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    records: bytes
    error_code: str | None = None
    message: str | None = None
    last_stable_offset: int = -1
    # read_committed: (producer id, first offset) of the aborted transactions the records overlap
    aborted_transactions: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class DeleteRecordsEntry:
    topic: str
    partition: int
    offset: int  # the new log start offset; -1: the high watermark


@dataclass(frozen=True)
class DeleteRecordsResult:
    topic: str
    partition: int
    low_watermark: int  # -1 on error
    error_code: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class PartitionOffsets:
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    last_stable_offset: int = -1  # latest for read_committed readers (and their group's lag)


class MetadataView(Protocol):
    def cluster(self) -> ClusterDescription: ...

    def topics(self) -> Sequence[TopicDescription]: ...

    def topic(self, name: str) -> TopicDescription | None: ...

    def topic_defaults(self) -> Mapping[str, str]: ...


class AdminService(Protocol):
    """Each call returns once the change is committed and visible in this node's MetadataView."""

    async def create_topic(
        self, name: str, partitions: int | None, replication_factor: int | None,
        configs: Mapping[str, str],
    ) -> TopicDescription: ...

    async def delete_topic(self, name: str) -> None: ...

    async def create_partitions(self, name: str, count: int) -> None: ...

    async def alter_configs(self, name: str, changes: Mapping[str, str | None]) -> None: ...


class ReplicaService(Protocol):
    async def produce(
        self, entries: Sequence[ProduceEntry], acks: int, timeout_ms: int
    ) -> list[ProduceResult]: ...

    async def fetch(
        self, entries: Sequence[FetchEntry], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> list[FetchResult]: ...

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets: ...

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int, read_committed: bool = False
    ) -> tuple[int, int] | None: ...

    async def delete_records(
        self, entries: Sequence[DeleteRecordsEntry], timeout_ms: int
    ) -> list[DeleteRecordsResult]: ...


NODE_INFO = web.AppKey("node_info", NodeInfo)
METADATA = web.AppKey("metadata_view", MetadataView)
ADMIN = web.AppKey("admin_service", AdminService)
REPLICAS = web.AppKey("replica_service", ReplicaService)

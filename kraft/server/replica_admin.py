"""What this broker's replicas hold, for the admin tools (Kafka's DescribeLogDirs and
DescribeProducers, which a client sends to each broker it asks about).

DescribeLogDirs (Describe on the cluster): each log directory of this broker with its partitions'
sizes and offset lags (Kafka's `max(high watermark - log end offset, 0)`, 0 for a current
replica) and the directory's total and usable bytes (a statvfs, off the loop); a directory that
is offline (JBOD: its disk failed, `kraft/broker/log_dirs.py`) or cannot be read is
KAFKA_STORAGE_ERROR, with no partitions. DescribeProducers (Read on the topic, answered per
partition as Kafka does): the idempotent producers the partition's leader keeps state for;
another broker answers NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from typing import Callable, Collection, Iterator, Mapping, Protocol, Sequence

from kraft.errors import KraftError
from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE, TOPIC
from kraft.server.access import CLUSTER, DESCRIBE_LOG_DIRS, DESCRIBE_PRODUCERS, NAMED, rule_of
from kraft.server.authorization import Authorization
from kraft.server.request_context import RequestContext

NO_TRANSACTION = -1  # Kafka's coordinator_epoch and current_txn_start_offset without a transaction


@dataclass(frozen=True, slots=True)
class LogDirPartition:
    topic: str
    partition: int
    size: int
    offset_lag: int


@dataclass(frozen=True)
class LogDirDescription:
    path: str
    error: KraftError | None
    partitions: tuple[LogDirPartition, ...]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = NO_TRANSACTION
    current_txn_start_offset: int = NO_TRANSACTION


@dataclass(frozen=True)
class PartitionProducers:
    topic: str
    partition: int
    error: KraftError | None
    producers: tuple[ActiveProducer, ...] = ()


class LocalReplica(Protocol):
    """One local replica's state as the log-dirs answer needs it (kraft/broker/partition_state.py)."""

    has_log: bool
    size_in_bytes: int
    high_watermark: int
    log_end_offset: int
    log_dir: str  # "" when the reader does not say (the first directory's)


class ReplicaReader(Protocol):
    """Implemented by the replica manager."""

    def local_partitions(self) -> Iterator[tuple[str, int, LocalReplica]]: ...

    async def active_producers(self, topic: str, partition: int) -> list[ActiveProducer]:
        """The producers the leader of the partition keeps state for; KraftError
        (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR) otherwise."""


class ReplicaAdminApis:
    def __init__(self, replicas: ReplicaReader | None, log_dirs: Sequence[str], authorization: Authorization,
                 offline: Callable[[], Collection[str]] = frozenset) -> None:
        """`replicas` None: a node without a broker's replicas (describes nothing); `offline()`:
        the log directories offline now."""
        self._replicas = replicas
        self.log_dirs = list(log_dirs)
        self.auth = authorization
        self.offline = offline

    async def describe_log_dirs(self, ctx: RequestContext,
                                wanted: Mapping[str, Sequence[int] | None] | None) -> list[LogDirDescription]:
        """Every log directory; its partitions among `wanted` (topic -> partitions, None: all of
        the topic; `wanted` None: all)."""
        self.auth.require(ctx, rule_of(DESCRIBE_LOG_DIRS, CLUSTER_TYPE, CLUSTER))

        def asked(topic: str, partition: int) -> bool:
            if wanted is None:
                return True
            partitions = wanted.get(topic, ())
            return partitions is None or partition in partitions

        held: dict[str, list[LogDirPartition]] = {path: [] for path in self.log_dirs}
        first = self.log_dirs[0] if self.log_dirs else ""
        for topic, partition, view in (self._replicas.local_partitions() if self._replicas else ()):
            where = held.get(view.log_dir or first)
            if view.has_log and where is not None and asked(topic, partition):
                where.append(LogDirPartition(
                    topic, partition, view.size_in_bytes, max(view.high_watermark - view.log_end_offset, 0)))
        offline = self.offline()
        return [await self._describe(path, tuple(held[path]), path in offline) for path in self.log_dirs]

    @staticmethod
    async def _describe(path: str, partitions: tuple[LogDirPartition, ...], offline: bool) -> LogDirDescription:
        if offline:
            return LogDirDescription(path, KraftError("KAFKA_STORAGE_ERROR", f"log directory {path} is offline"), ())
        try:
            usage = await asyncio.to_thread(shutil.disk_usage, path)
        except OSError as e:
            return LogDirDescription(path, KraftError("KAFKA_STORAGE_ERROR", f"log directory {path}: {e}"), ())
        return LogDirDescription(path, None, partitions, usage.total, usage.free)

    async def describe_producers(self, ctx: RequestContext,
                                 wanted: Sequence[tuple[str, int]]) -> list[PartitionProducers]:
        """Per partition: its active producers, or the error of that partition alone."""
        rule = rule_of(DESCRIBE_PRODUCERS, TOPIC, NAMED)
        refused = set(self.auth.refused(ctx, rule, {topic for topic, _ in wanted}))
        if refused:
            denial = self.auth.failure(ctx, rule.operation, TOPIC, refused)
        answers = []
        for topic, partition in wanted:
            if topic in refused:
                answers.append(PartitionProducers(topic, partition, denial))
                continue
            try:
                if self._replicas is None:
                    raise KraftError("NOT_LEADER_OR_FOLLOWER", "this node holds no replicas")
                producers = await self._replicas.active_producers(topic, partition)
            except KraftError as e:  # each partition is answered on its own
                answers.append(PartitionProducers(topic, partition, e))
                continue
            answers.append(PartitionProducers(topic, partition, None, tuple(producers)))
        return answers

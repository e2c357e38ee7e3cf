"""The record APIs over the replica manager (KafkaApis' handlers for Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, DeleteRecords and InitProducerId): each authorizes its API's resources
through the request context, calls the replica manager, and answers typed results; produce and
fetch also charge the context's client quota and answer the throttle time (the listener holds
the answer back that long).

Produce: as Kafka answers, a topic the principal may not Write answers TOPIC_AUTHORIZATION_FAILED
on its partitions and the other topics' are appended; a topic that does not exist is
auto-created first when `auto.create.topics.enable` (Create on the cluster or the topic), else
its partitions answer UNKNOWN_TOPIC_OR_PARTITION. A transactional produce needs
Write on its transactional id, and transactional batches must name one (`transactional_refusal`,
Kafka's handleProduceRequest rule: the whole request is refused): else a principal with
Write on the topic alone could append to another producer's open transaction by naming its
producer id and epoch.

Fetch: a replica's fetch (`replica_id` set) is the cluster's own nodes', as that node; a
consumer's needs Read on every topic, and a fetch naming no partition is answered at once
(Kafka's ReplicaManager.fetchMessages).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Iterable, Sequence

from kraft.errors import KraftError, from_exception
from kraft.log.batch import TRANSACTIONAL_FLAG, iter_batches
from kraft.log.errors import LogError
from kraft.metadata.acl import TOPIC, TRANSACTIONAL_ID
from kraft.producer_ids import derived_producer_id
from kraft.server.access import (
    DELETE_RECORDS, FETCH, INIT_PRODUCER_ID, LIST_OFFSETS, NAMED, OFFSET_FOR_LEADER_EPOCH, PRODUCE,
    TRANSACTIONAL_PRODUCE, rule_of,
)
from kraft.server.authorization import Authorization
from kraft.server.quotas import FETCH as FETCH_QUOTA, PRODUCE as PRODUCE_QUOTA, Quotas
from kraft.server.records import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, NO_REPLICA, DeleteRecordsEntry, DeleteRecordsResult, EpochEndOffset,
    FetchEntry, FetchPartitionResult, PartitionOffsets, ProduceEntry, ProducePartitionResult, ProducerIdService,
    ReplicaService,
)
from kraft.server.request_context import RequestContext
from kraft.server.topic_apis import TopicApis

_WRITE = rule_of(PRODUCE, TOPIC, NAMED)
_READ = rule_of(FETCH, TOPIC, NAMED)
_DESCRIBE_OFFSETS = rule_of(LIST_OFFSETS, TOPIC, NAMED)
_DESCRIBE_EPOCHS = rule_of(OFFSET_FOR_LEADER_EPOCH, TOPIC, NAMED)
_DELETE = rule_of(DELETE_RECORDS, TOPIC, NAMED)
_WRITE_TRANSACTIONAL_ID = rule_of(INIT_PRODUCER_ID, TRANSACTIONAL_ID, NAMED)
_WRITE_PRODUCE_TRANSACTIONAL_ID = rule_of(PRODUCE, TRANSACTIONAL_ID, NAMED, TRANSACTIONAL_PRODUCE)


@dataclass(frozen=True)
class ProduceResult:
    partitions: list[ProducePartitionResult]
    throttle_time_ms: int


@dataclass(frozen=True)
class FetchRequest:
    entries: Sequence[FetchEntry]
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    replica_id: int = NO_REPLICA
    replica_epoch: int = -1  # KIP-903: the follower's broker epoch; -1 unchecked


@dataclass(frozen=True)
class FetchResult:
    partitions: list[FetchPartitionResult]
    throttle_time_ms: int


@dataclass(frozen=True)
class ListOffsetsResult:
    """Kafka's ListOffsets answer for one partition: the offset, and the timestamp of the record
    found by timestamp (-1 for the log start and the high watermark)."""

    offset: int | None  # None: no record at or after the timestamp
    timestamp: int


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


def has_transactional_batch(records: bytes | memoryview | None) -> bool:
    """Whether a batch of `records` (kraft's or Kafka's v2: the attributes sit at the same place)
    has the transactional bit (Kafka's RequestUtils.hasTransactionalRecords), read from the
    headers alone: the listener checks the rest."""
    try:
        return any(header.attributes & TRANSACTIONAL_FLAG for _, header in iter_batches(records or b""))
    except LogError:
        return False  # not batches: the listener refuses them


def transactional_refusal(auth: Authorization, ctx: RequestContext, transactional_id: str | None,
                          records: Iterable[bytes | memoryview | None]) -> KraftError | None:
    """Kafka's rule for a produce as a whole (KafkaApis.handleProduceRequest): one naming a
    transactional id needs Write on it, and one whose `records` (each partition's) hold a
    transactional batch must name one. The refusal (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, logged
    and counted), or None."""
    if transactional_id is not None:
        if not auth.refused(ctx, _WRITE_PRODUCE_TRANSACTIONAL_ID, (transactional_id,)):
            return None
        return auth.failure(ctx, _WRITE_PRODUCE_TRANSACTIONAL_ID.operation, TRANSACTIONAL_ID, (transactional_id,))
    if not any(has_transactional_batch(r) for r in records):
        return None
    error = auth.failure(ctx, _WRITE_PRODUCE_TRANSACTIONAL_ID.operation, TRANSACTIONAL_ID, ("",))
    return KraftError(error.error_code, "transactional batches need the request's transactional_id, which the "
                                        "principal may Write (Kafka's rule); none was named")


def latest_offset(offsets: PartitionOffsets, read_committed: bool) -> int:
    """Kafka's ListOffsets latest: the last stable offset for read_committed, else the high watermark."""
    return offsets.last_stable_offset if read_committed else offsets.high_watermark


class RecordApis:
    def __init__(self, replicas: ReplicaService, topics: TopicApis, authorization: Authorization, quotas: Quotas,
                 producer_ids: ProducerIdService | None = None) -> None:
        self.replicas = replicas
        self.topics = topics
        self.auth = authorization
        self.quotas = quotas
        self.producer_ids = producer_ids

    async def produce(self, ctx: RequestContext, entries: Sequence[ProduceEntry], acks: int,
                      timeout_ms: int, transactional_id: str | None = None) -> ProduceResult:
        """Appends batches already checked by the listener (framing, CRCs); one result per entry,
        in order. `transactional_id`: the request's (Kafka's Produce field), which its
        transactional batches need: refused, the whole request is (raised). A topic the
        principal may not Write, or that does not exist and cannot be created, answers its own
        partitions' error and the others are appended (KafkaApis.handleProduceRequest)."""
        refusal = transactional_refusal(self.auth, ctx, transactional_id, (e.records for e in entries))
        if refusal is not None:
            raise refusal
        topics = sorted({e.topic for e in entries})
        failed: dict[str, KraftError] = {}
        refused = self.auth.refused(ctx, _WRITE, topics)
        if refused:  # logged and counted once for the request, as the authorizer's denials are
            failed = dict.fromkeys(refused, self.auth.failure(ctx, _WRITE.operation, TOPIC, refused))
        # the topics that exist, looked up inline: a task per topic (gather) cost every produce
        # two more turns of the event loop, each behind whatever else was ready to run
        missing = [name for name in topics if name not in failed and not self.topics.exists(name)]
        created = await asyncio.gather(*(self.topics.topic_or_create(ctx, PRODUCE, name) for name in missing),
                                       return_exceptions=True) if missing else ()
        for name, outcome in zip(missing, created):
            if isinstance(outcome, asyncio.CancelledError):
                raise outcome
            if isinstance(outcome, BaseException):
                failed[name] = from_exception(outcome)
        appended = iter(await self.replicas.produce([e for e in entries if e.topic not in failed], acks, timeout_ms))
        results = [next(appended) if e.topic not in failed else
                   ProducePartitionResult(e.topic, e.partition, -1, -1, failed[e.topic].error_code,
                                          failed[e.topic].message)
                   for e in entries]
        throttle_ms = self.quotas.throttle_time(ctx, PRODUCE_QUOTA, sum(len(e.records) for e in entries))
        return ProduceResult(results, throttle_ms)

    async def fetch(self, ctx: RequestContext, request: FetchRequest) -> FetchResult:
        """A consumer's fetch (below the high watermark) or a follower's (up to the log end);
        the long poll answers at `min_bytes`, on news, or at `max_wait_ms`."""
        replica = request.replica_id != NO_REPLICA
        if replica:  # a replica's fetch moves the high watermark and the ISR: nodes only
            self.auth.require_node(ctx, as_node_id=request.replica_id)
        else:
            self.auth.require(ctx, _READ, {e.topic for e in request.entries})
        if not request.entries:
            return FetchResult([], 0)
        results = await self.replicas.replica_fetch(request.replica_id, request.replica_epoch, request.entries,
                                                    request.max_wait_ms, request.min_bytes, request.max_bytes)
        throttle_ms = 0 if replica else self.quotas.throttle_time(
            ctx, FETCH_QUOTA, sum(len(r.records) for r in results))
        return FetchResult(results, throttle_ms)

    async def read(self, ctx: RequestContext, topic: str, partition: int, offset: int | str, timestamp: int | None,
                   max_bytes: int, max_wait_ms: int, read_committed: bool = False) -> tuple[int, FetchPartitionResult]:
        """The convenience read of one partition from `offset` (a number, "earliest" or "latest")
        or, given a `timestamp`, from the first offset at or after it (else the latest): the
        offset read from and the stored batches there (read_committed: up to the last stable
        offset, with the aborted transactions they overlap). Needs Read, as a fetch does."""
        self.auth.require(ctx, _READ, (topic,))
        start = await self._start_offset(topic, partition, offset, timestamp, read_committed)
        [result] = await self.replicas.replica_fetch(
            NO_REPLICA, -1, [FetchEntry(topic, partition, start, max_bytes, read_committed=read_committed)],
            max_wait_ms, 1, max_bytes)
        return start, result

    async def _start_offset(self, topic: str, partition: int, offset: int | str, timestamp: int | None,
                            read_committed: bool) -> int:
        if timestamp is not None:
            found = await self.replicas.offset_for_timestamp(topic, partition, timestamp, read_committed)
            if found is not None:
                return found[0]
            offset = "latest"
        offsets = await self.replicas.offsets(topic, partition)
        if offset == "earliest":
            return offsets.log_start_offset
        if offset == "latest":
            return latest_offset(offsets, read_committed)
        return int(offset)

    async def partition_offsets(self, ctx: RequestContext, topic: str, partition: int) -> PartitionOffsets:
        """The partition's log start, high watermark and log end offset (on its leader)."""
        self.auth.require(ctx, _DESCRIBE_OFFSETS, (topic,))
        return await self.replicas.offsets(topic, partition)

    async def list_offsets(self, ctx: RequestContext, topic: str, partition: int, timestamp: int,
                           read_committed: bool = False) -> ListOffsetsResult:
        """Kafka's ListOffsets: EARLIEST_TIMESTAMP (the log start), LATEST_TIMESTAMP (the high
        watermark; read_committed: the last stable offset), or the first offset whose record is
        at or after `timestamp` (below that bound)."""
        self.auth.require(ctx, _DESCRIBE_OFFSETS, (topic,))
        if timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            offsets = await self.replicas.offsets(topic, partition)
            latest = timestamp == LATEST_TIMESTAMP
            return ListOffsetsResult(latest_offset(offsets, read_committed) if latest else offsets.log_start_offset, -1)
        found = await self.replicas.offset_for_timestamp(topic, partition, timestamp, read_committed)
        return ListOffsetsResult(None, -1) if found is None else ListOffsetsResult(found[0], found[1])

    async def offset_for_leader_epoch(self, ctx: RequestContext, topic: str, partition: int,
                                      current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset:
        """Kafka's OffsetForLeaderEpoch from a client (KIP-320: after a leader change, where its
        position's epoch ends on the leader, to detect a truncated log)."""
        self.auth.require(ctx, _DESCRIBE_EPOCHS, (topic,))
        return await self.replicas.offset_for_leader_epoch(topic, partition, current_leader_epoch, leader_epoch)

    async def delete_records(self, ctx: RequestContext, entries: Sequence[DeleteRecordsEntry],
                             timeout_ms: int) -> list[DeleteRecordsResult]:
        """Kafka's DeleteRecords on the partitions this broker leads; one result per entry."""
        self.auth.require(ctx, _DELETE, {e.topic for e in entries})
        return await self.replicas.delete_records(entries, timeout_ms)

    async def init_producer_id(self, ctx: RequestContext, transactional_id: str | None) -> ProducerIdAndEpoch:
        """Kafka's InitProducerId: an id from this broker's blocks, or with a transactional id the
        id derived from the name (kraft/producer_ids.py), epoch 0 either way."""
        if transactional_id is not None:
            self.auth.require(ctx, _WRITE_TRANSACTIONAL_ID, (transactional_id,))
            return ProducerIdAndEpoch(derived_producer_id(transactional_id), 0)
        if self.producer_ids is None:
            raise KraftError("BROKER_NOT_AVAILABLE", "this node allocates no producer ids (it is not a broker)")
        return ProducerIdAndEpoch(await self.producer_ids.allocate_producer_id(), 0)

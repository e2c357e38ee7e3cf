"""ListOffsets (key 2, v1-6: earliest -2, latest -1, by timestamp; v2+'s read_committed isolation
level: latest is the last stable offset, by timestamp stays below it) and OffsetForLeaderEpoch
(key 23, v2-4: where a leader epoch ends on the leader, KIP-320), per partition on its leader,
each partition's failure its own error."""

from __future__ import annotations

from typing import Any

from kraft.kafka.apis.common import Api, attempt, code, entity, ms, nested, response_of
from kraft.server.records import NO_EPOCH
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 2, 23
READ_COMMITTED = 1


def list_offsets(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        topic_cls, partition_cls = nested(response, "ListOffsetsTopicResponse"), nested(
            response, "ListOffsetsPartitionResponse")
        read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                found, error = await attempt(lambda t=t, p=p: services.records.list_offsets(
                    ctx, t.name, p.partition_index, int(p.timestamp), read_committed))
                offset = -1 if found is None or found.offset is None else found.offset
                timestamp = -1 if found is None else found.timestamp
                partitions.append(entity(partition_cls, partition_index=p.partition_index, error_code=code(error),
                                         timestamp=timestamp, offset=offset, leader_epoch=NO_EPOCH,
                                         old_style_offsets=(offset,) if offset >= 0 else ()))
            topics.append(entity(topic_cls, name=t.name, partitions=tuple(partitions)))
        return entity(response, throttle_time=ms(0), topics=tuple(topics))
    return handle


def offset_for_leader_epoch(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        topic_cls, partition_cls = nested(response, "OffsetForLeaderTopicResult"), nested(response, "EpochEndOffset")
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                found, error = await attempt(lambda t=t, p=p: services.records.offset_for_leader_epoch(
                    ctx, t.topic, p.partition, int(getattr(p, "current_leader_epoch", NO_EPOCH)), int(p.leader_epoch)))
                epoch, end = (NO_EPOCH, -1) if found is None else (found.leader_epoch, found.end_offset)
                partitions.append(entity(partition_cls, error_code=code(error), partition=p.partition,
                                         leader_epoch=epoch, end_offset=end))
            topics.append(entity(topic_cls, topic=t.topic, partitions=tuple(partitions)))
        return entity(response, throttle_time=ms(0), topics=tuple(topics))
    return handle


APIS = (
    Api(LIST_OFFSETS, 1, 6, list_offsets, "ListOffsets"),
    Api(OFFSET_FOR_LEADER_EPOCH, 2, 4, offset_for_leader_epoch, "OffsetForLeaderEpoch"),
)

"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848, v0-v1) over the Kafka protocol: thin
adapters over the group service's KIP-848 groups (the ones the HTTP heartbeat serves), for the
clients that ask for `group.protocol=consumer`. Partitions travel by topic id on this API: they
are named through the broker's metadata image (a topic id it does not know is left out, as the
coordinator cannot assign it; an owned partition of a deleted topic is gone anyway).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any, Iterable, Mapping

from kraft.errors import KraftError
from kraft.kafka.entities import error_code
from kraft.kafka.handling import KafkaApi
from kraft.server.groups import GroupHeartbeat, TopicPartitions
from kraft.server.metadata import MetadataView
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000  # Kafka's max.poll.interval.ms default


def _rebalance_timeout_ms(value: datetime.timedelta) -> int:
    """-1 ("unchanged", sent after the join) keeps Kafka's default: only a join's value is used."""
    ms = int(value.total_seconds() * 1000)
    return ms if ms >= 0 else DEFAULT_REBALANCE_TIMEOUT_MS


def _topic_uuid(metadata: MetadataView, name: str) -> uuid.UUID | None:
    topic = metadata.topic(name)
    try:
        return None if topic is None else uuid.UUID(topic.topic_id)
    except ValueError:
        return None


def _named(metadata: MetadataView, owned: Iterable[Any]) -> frozenset[tuple[str, int]]:
    names = {t.topic_id: t.name for t in metadata.topics()}
    out = set()
    for tp in owned:
        name = names.get(str(tp.topic_id))
        if name is not None:
            out.update((name, int(p)) for p in tp.partitions)
    return frozenset(out)


async def heartbeat(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    if request.instance_id is not None:
        raise KraftError("UNSUPPORTED_VERSION", "static membership (instance_id) of consumer groups is not supported")
    owned = None if request.topic_partitions is None else _named(services.metadata, request.topic_partitions)
    names = request.subscribed_topic_names
    beat = GroupHeartbeat(
        member_id=request.member_id, member_epoch=request.member_epoch, client_id=ctx.client_id,
        client_host=ctx.client_address, subscribed_topics=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor, owned=owned,
        rebalance_timeout_ms=_rebalance_timeout_ms(request.rebalance_timeout),
    )
    result = await services.groups.heartbeat(ctx, request.group_id, beat)
    return {
        "error_code": error_code(None), "member_id": result.member_id, "member_epoch": result.member_epoch,
        "heartbeat_interval": result.heartbeat_interval_ms,
        "assignment": {"topic_partitions": [
            {"topic_id": topic_id, "partitions": t.partitions} for t in result.assignment
            if (topic_id := _topic_uuid(services.metadata, t.topic)) is not None]},
    }


async def describe(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    def assignment(tps: Iterable[TopicPartitions]) -> dict[str, Any]:
        return {"topic_partitions": [{"topic_id": _topic_uuid(services.metadata, t.topic), "topic_name": t.topic,
                                      "partitions": t.partitions} for t in tps]}

    described = []
    for group_id in request.group_ids:
        try:
            d = await services.groups.describe_group(ctx, group_id)
            if d.group_type != "consumer":
                raise KraftError("GROUP_ID_NOT_FOUND", f"group {group_id!r} is not a consumer group")
        except KraftError as e:
            described.append({"error_code": error_code(e), "error_message": e.message, "group_id": group_id,
                              "group_state": "", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "",
                              "members": (), "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        described.append({
            "error_code": error_code(None), "group_id": group_id, "group_state": d.state,
            "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch, "assignor_name": d.assignor,
            "members": [{"member_id": m.member_id, "member_epoch": m.member_epoch, "client_id": m.client_id,
                         "client_host": m.host, "subscribed_topic_names": m.subscribed_topics,
                         "subscribed_topic_regex": m.subscribed_topic_regex, "assignment": assignment(m.assignment),
                         "target_assignment": assignment(m.target_assignment)} for m in d.members],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
    return {"groups": described}


APIS = (
    KafkaApi(CONSUMER_GROUP_HEARTBEAT, 0, 1, heartbeat),
    KafkaApi(CONSUMER_GROUP_DESCRIBE, 0, 1, describe),
)

"""`GET /v1/metadata`: the brokers, the active controller and the topics this node knows, plus the
JSON shapes of topics and partitions shared with the topic routes.

With `allow_auto_topic_creation=true` (Kafka's MetadataRequest field; producers send it) a named
topic that does not exist is created with the broker defaults when `auto.create.topics.enable`,
by the same rule as produce. A named topic that is missing after that is reported in
`topic_errors` with the reason, so a client can fail at once instead of waiting for it."""

from __future__ import annotations

from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError
from kraft.api.messages.common import check_topic_name
from kraft.api.messages.topics import (
    Broker, MetadataQuery, MetadataResponse, PartitionState, TopicError, TopicMetadata,
)
from kraft.api.routes.services import METADATA, NODE_INFO, PartitionDescription, TopicDescription
from kraft.api.wire import read_query, render

routes = web.RouteTableDef()


def partition_state(p: PartitionDescription) -> PartitionState:
    return PartitionState(partition=p.partition, leader=p.leader, leader_epoch=p.leader_epoch,
                          replicas=list(p.replicas), isr=list(p.isr))


def _topic_metadata(t: TopicDescription) -> TopicMetadata:
    return TopicMetadata(name=t.name, topic_id=t.topic_id, internal=t.internal,
                         partitions=[partition_state(p) for p in t.partitions])


async def _missing_topic_error(request: web.Request, name: str, auto_create: bool) -> KraftError | TopicDescription:
    """The topic once auto-created, or why it is not there."""
    if not auto_create:
        return KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    if not request.app[NODE_INFO].auto_create_topics:
        return KraftError("UNKNOWN_TOPIC_OR_PARTITION",
                          f"topic {name!r} does not exist and auto.create.topics.enable is false on this broker")
    from kraft.api.routes.records import topic_or_create  # records imports this module

    try:
        check_topic_name(name, "create")  # internal topics are created by their owners, with their settings
        return await topic_or_create(request, name)
    except KraftError as e:
        return e


@routes.get("/v1/metadata")
async def metadata(request: web.Request) -> web.Response:
    view = request.app[METADATA]
    cluster = view.cluster()
    query = read_query(request, MetadataQuery)
    wanted, auto_create = query.topics, query.allow_auto_topic_creation
    topic_errors: list[TopicError] = []
    if wanted is None:  # only the topics the principal may describe, as Kafka answers
        topics = authz.visible(request, view.topics(), lambda t: t.name)
    else:
        names = list(dict.fromkeys(check_topic_name(n.strip()) for n in wanted.split(",") if n.strip()))
        describable = set(authz.visible(request, names, lambda name: name))
        topics = []
        for name in names:
            if name not in describable:
                topic_errors.append(_topic_error(name, authz.listing_refusal(request, name)))
                continue
            found: TopicDescription | KraftError | None = view.topic(name)
            if found is None:
                found = await _missing_topic_error(request, name, auto_create)
            if isinstance(found, KraftError):
                topic_errors.append(_topic_error(name, found))
            else:
                topics.append(found)
    return render(request, MetadataResponse(
        cluster_id=cluster.cluster_id, controller_id=cluster.controller_id,
        brokers=[Broker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack) for b in cluster.brokers],
        topics=[_topic_metadata(t) for t in topics], topic_errors=topic_errors))


def _topic_error(name: str, error: KraftError) -> TopicError:
    return TopicError(name=name, error_code=error.error_code, message=error.message, retriable=error.retriable)


def require_topic(request: web.Request, name: str) -> TopicDescription:
    """The topic named in the path, or UNKNOWN_TOPIC_OR_PARTITION."""
    topic = request.app[METADATA].topic(check_topic_name(name))
    if topic is None:
        raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    return topic

"""`GET /v1/metadata`: the brokers, the active controller and the topics this node knows (the
topic services' Metadata, kraft/server/topic_apis.py), plus the JSON shapes of topics and
partitions shared with the topic routes.

With `allow_auto_topic_creation=true` (Kafka's MetadataRequest field; producers send it) a named
topic that does not exist is created with the broker defaults when `auto.create.topics.enable`,
by the same rule as produce. A named topic that is missing after that is reported in
`topic_errors` with the reason, so a client can fail at once instead of waiting for it."""

from __future__ import annotations

from aiohttp import web

from kraft.api.messages.topics import (
    Broker, MetadataQuery, MetadataResponse, PartitionState, TopicError, TopicMetadata,
)
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_query, render
from kraft.server.metadata import PartitionDescription, TopicDescription

routes = web.RouteTableDef()


def partition_state(p: PartitionDescription) -> PartitionState:
    return PartitionState(partition=p.partition, leader=p.leader, leader_epoch=p.leader_epoch,
                          replicas=list(p.replicas), isr=list(p.isr))


def _topic_metadata(t: TopicDescription) -> TopicMetadata:
    return TopicMetadata(name=t.name, topic_id=t.topic_id, internal=t.internal,
                         partitions=[partition_state(p) for p in t.partitions])


@routes.get("/v1/metadata")
async def metadata(request: web.Request) -> web.Response:
    query = read_query(request, MetadataQuery)
    names = None if query.topics is None else [n.strip() for n in query.topics.split(",") if n.strip()]
    answer = await services_of(request).topics.metadata(context_of(request), names, query.allow_auto_topic_creation)
    cluster = answer.cluster
    return render(request, MetadataResponse(
        cluster_id=cluster.cluster_id, controller_id=cluster.controller_id,
        brokers=[Broker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack) for b in cluster.brokers],
        topics=[_topic_metadata(t) for t in answer.topics],
        topic_errors=[TopicError(name=e.name, error_code=e.error.error_code, message=e.error.message,
                                 retriable=e.error.retriable) for e in answer.topic_errors]))

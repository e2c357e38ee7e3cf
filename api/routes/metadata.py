"""`GET /v1/metadata`: the brokers, the active controller and the topics this node knows, plus the
JSON shapes of topics and partitions shared with the topic routes."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.errors import KraftError
from api.routes.services import METADATA, PartitionDescription, TopicDescription
from api.wire import check_topic_name, render

routes = web.RouteTableDef()


def partition_json(p: PartitionDescription) -> dict[str, Any]:
    return {
        "partition": p.partition,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
    }


def topic_json(t: TopicDescription) -> dict[str, Any]:
    return {
        "name": t.name,
        "topic_id": t.topic_id,
        "internal": t.internal,
        "partitions": [partition_json(p) for p in t.partitions],
    }


@routes.get("/v1/metadata")
async def metadata(request: web.Request) -> web.Response:
    view = request.app[METADATA]
    cluster = view.cluster()
    wanted = request.query.get("topics")
    if wanted is None:
        topics = list(view.topics())
    else:
        names = [check_topic_name(n.strip()) for n in wanted.split(",") if n.strip()]
        found = (view.topic(n) for n in dict.fromkeys(names))
        topics = [t for t in found if t is not None]
    return render(request, {
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller_id,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cluster.brokers
        ],
        "topics": [topic_json(t) for t in topics],
    })


def require_topic(request: web.Request, name: str) -> TopicDescription:
    """The topic named in the path, or UNKNOWN_TOPIC_OR_PARTITION."""
    topic = request.app[METADATA].topic(check_topic_name(name))
    if topic is None:
        raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    return topic

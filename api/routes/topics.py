"""Topic administration: create, list, describe, delete, add partitions, read and alter configs.

Every change goes to the controller through `AdminService` and is answered once this node's
metadata shows it."""

from __future__ import annotations

from typing import Any, Mapping

from aiohttp import web

from kraft.api import authz
from kraft.api.errors import invalid_request
from kraft.api.routes.metadata import partition_json, require_topic
from kraft.api.routes.services import ADMIN, METADATA
from kraft.api.wire import Fields, check_topic_name, read_body, render
from kraft.metadata.acl import TOPIC

routes = web.RouteTableDef()

MAX_PARTITIONS = 10_000  # per topic: bounds what one request can make the controller build
MAX_REPLICATION_FACTOR = 32767


def _config_values(configs: Mapping[str, Any], allow_null: bool) -> dict[str, Any]:
    """Config maps carry strings (numbers and booleans are accepted and stringified)."""
    out: dict[str, Any] = {}
    for key, value in configs.items():
        if not isinstance(key, str) or not key:
            raise invalid_request(f"config key {key!r} must be a non-empty string")
        if value is None and allow_null:
            out[key] = None
        elif isinstance(value, bool):
            out[key] = str(value).lower()
        elif isinstance(value, (str, int)):
            out[key] = str(value)
        else:
            raise invalid_request(f"config {key!r} must be a string, number or boolean")
    return out


@routes.post("/v1/topics")
async def create_topic(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    fields = Fields(body)
    name = check_topic_name(fields.raw("name"), "create")
    if not authz.may_create_topic(request, name):
        raise authz.authorization_failed(request, "CREATE", TOPIC, (name,))
    partitions = fields.get_int("partitions", None, 1, MAX_PARTITIONS, "INVALID_PARTITIONS")
    replication_factor = fields.get_int("replication_factor", None, 1, MAX_REPLICATION_FACTOR, "INVALID_REPLICATION_FACTOR")
    configs = _config_values(fields.get_object("configs", {}), allow_null=False)
    topic = await request.app[ADMIN].create_topic(name, partitions, replication_factor, configs)
    return render(request, {
        "name": topic.name,
        "topic_id": topic.topic_id,
        "partitions": len(topic.partitions),
        "replication_factor": len(topic.partitions[0].replicas) if topic.partitions else 0,
        "configs": dict(topic.configs),
    }, status=201)


@routes.get("/v1/topics")
async def list_topics(request: web.Request) -> web.Response:
    topics = authz.visible(request, "DESCRIBE", TOPIC, sorted(request.app[METADATA].topics(), key=lambda t: t.name),
                           lambda t: t.name)
    return render(request, {"topics": [
        {"name": t.name, "topic_id": t.topic_id, "internal": t.internal,
         "partitions": len(t.partitions)}
        for t in topics
    ]})


@routes.get("/v1/topics/{topic}")
async def describe_topic(request: web.Request) -> web.Response:
    authz.require(request, "DESCRIBE", TOPIC, request.match_info["topic"])
    topic = require_topic(request, request.match_info["topic"])
    return render(request, {
        "name": topic.name,
        "topic_id": topic.topic_id,
        "internal": topic.internal,
        "configs": dict(topic.configs),
        "partitions": [partition_json(p) for p in topic.partitions],
    })


@routes.delete("/v1/topics/{topic}")
async def delete_topic(request: web.Request) -> web.Response:
    authz.require(request, "DELETE", TOPIC, request.match_info["topic"])
    topic = require_topic(request, check_topic_name(request.match_info["topic"], "delete"))
    await request.app[ADMIN].delete_topic(topic.name)
    return render(request, {"name": topic.name})


@routes.post("/v1/topics/{topic}/partitions")
async def create_partitions(request: web.Request) -> web.Response:
    # The group coordinator's hashing fixes __consumer_offsets' partition count for good.
    authz.require(request, "ALTER", TOPIC, request.match_info["topic"])
    topic = require_topic(request, check_topic_name(request.match_info["topic"], "add partitions to"))
    body, _ = await read_body(request)
    count = Fields(body).get_int("count", minimum=1, maximum=MAX_PARTITIONS, range_error="INVALID_PARTITIONS")
    await request.app[ADMIN].create_partitions(topic.name, count)
    return render(request, {"name": topic.name, "partitions": count})


@routes.get("/v1/topics/{topic}/configs")
async def describe_configs(request: web.Request) -> web.Response:
    authz.require(request, "DESCRIBE_CONFIGS", TOPIC, request.match_info["topic"])
    topic = require_topic(request, request.match_info["topic"])
    defaults = request.app[METADATA].topic_defaults()
    return render(request, {"configs": dict(topic.configs), "defaults": dict(defaults)})


@routes.patch("/v1/topics/{topic}/configs")
async def alter_configs(request: web.Request) -> web.Response:
    authz.require(request, "ALTER_CONFIGS", TOPIC, request.match_info["topic"])
    topic = require_topic(request, request.match_info["topic"])
    body, _ = await read_body(request)
    changes = _config_values(Fields(body).get_object("configs"), allow_null=True)
    await request.app[ADMIN].alter_configs(topic.name, changes)
    return render(request, {"configs": dict(require_topic(request, topic.name).configs)})

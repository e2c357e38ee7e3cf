"""Topic administration: create, list, describe, delete, add partitions, read and alter configs.

Every change goes to the controller through `AdminService` and is answered once this node's
metadata shows it."""

from __future__ import annotations

from aiohttp import web

from kraft.api import authz
from kraft.api.messages.common import check_topic_name, config_strings
from kraft.api.messages.topics import (
    AlterConfigsRequest, AlterConfigsResponse, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicRequest,
    CreateTopicResponse, DeleteTopicResponse, DescribeTopicResponse, ListTopicsResponse, TopicConfigsResponse,
    TopicSummary,
)
from kraft.api.routes.metadata import partition_state, require_topic
from kraft.api.routes.services import ADMIN, METADATA
from kraft.api.wire import read_message, render

routes = web.RouteTableDef()


@routes.post("/v1/topics")
async def create_topic(request: web.Request) -> web.Response:
    body = await read_message(request, CreateTopicRequest)
    name = check_topic_name(body.name, "create")
    authz.require_named(request, [name])
    topic = await request.app[ADMIN].create_topic(name, body.partitions, body.replication_factor,
                                                  config_strings(body.configs))
    return render(request, CreateTopicResponse(
        name=topic.name, topic_id=topic.topic_id, partitions=len(topic.partitions),
        replication_factor=len(topic.partitions[0].replicas) if topic.partitions else 0,
        configs=dict(topic.configs)), status=201)


@routes.get("/v1/topics")
async def list_topics(request: web.Request) -> web.Response:
    topics = authz.visible(request, sorted(request.app[METADATA].topics(), key=lambda t: t.name), lambda t: t.name)
    return render(request, ListTopicsResponse(topics=[
        TopicSummary(name=t.name, topic_id=t.topic_id, internal=t.internal, partitions=len(t.partitions))
        for t in topics
    ]))


@routes.get("/v1/topics/{topic}")
async def describe_topic(request: web.Request) -> web.Response:
    topic = require_topic(request, request.match_info["topic"])
    return render(request, DescribeTopicResponse(
        name=topic.name, topic_id=topic.topic_id, internal=topic.internal, configs=dict(topic.configs),
        partitions=[partition_state(p) for p in topic.partitions]))


@routes.delete("/v1/topics/{topic}")
async def delete_topic(request: web.Request) -> web.Response:
    topic = require_topic(request, check_topic_name(request.match_info["topic"], "delete"))
    await request.app[ADMIN].delete_topic(topic.name)
    return render(request, DeleteTopicResponse(name=topic.name))


@routes.post("/v1/topics/{topic}/partitions")
async def create_partitions(request: web.Request) -> web.Response:
    # The group coordinator's hashing fixes __consumer_offsets' partition count for good.
    topic = require_topic(request, check_topic_name(request.match_info["topic"], "add partitions to"))
    count = (await read_message(request, CreatePartitionsRequest)).count
    await request.app[ADMIN].create_partitions(topic.name, count)
    return render(request, CreatePartitionsResponse(name=topic.name, partitions=count))


@routes.get("/v1/topics/{topic}/configs")
async def describe_configs(request: web.Request) -> web.Response:
    topic = require_topic(request, request.match_info["topic"])
    defaults = request.app[METADATA].topic_defaults()
    return render(request, TopicConfigsResponse(configs=dict(topic.configs), defaults=dict(defaults)))


@routes.patch("/v1/topics/{topic}/configs")
async def alter_configs(request: web.Request) -> web.Response:
    topic = require_topic(request, request.match_info["topic"])
    changes = config_strings((await read_message(request, AlterConfigsRequest)).configs)
    await request.app[ADMIN].alter_configs(topic.name, changes)
    return render(request, AlterConfigsResponse(configs=dict(require_topic(request, topic.name).configs)))

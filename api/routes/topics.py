"""Topic administration: create, list, describe, delete, add partitions, read and alter configs,
adapters over the topic services (kraft/server/topic_apis.py).

Every change goes to the controller and is answered once this node's metadata shows it."""

from __future__ import annotations

from aiohttp import web

from kraft.api.messages.common import config_strings
from kraft.api.messages.topics import (
    AlterConfigsRequest, AlterConfigsResponse, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicRequest,
    CreateTopicResponse, DeleteTopicResponse, DescribeTopicResponse, ListTopicsResponse, TopicConfigsResponse,
    TopicSummary,
)
from kraft.api.routes.metadata import partition_state
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_message, render

routes = web.RouteTableDef()


@routes.post("/v1/topics")
async def create_topic(request: web.Request) -> web.Response:
    body = await read_message(request, CreateTopicRequest)
    topic = await services_of(request).topics.create_topic(context_of(request), body.name, body.partitions,
                                                           body.replication_factor, config_strings(body.configs))
    return render(request, CreateTopicResponse(
        name=topic.name, topic_id=topic.topic_id, partitions=len(topic.partitions),
        replication_factor=len(topic.partitions[0].replicas) if topic.partitions else 0,
        configs=dict(topic.configs)), status=201)


@routes.get("/v1/topics")
async def list_topics(request: web.Request) -> web.Response:
    topics = services_of(request).topics.list_topics(context_of(request))
    return render(request, ListTopicsResponse(topics=[
        TopicSummary(name=t.name, topic_id=t.topic_id, internal=t.internal, partitions=len(t.partitions))
        for t in topics
    ]))


@routes.get("/v1/topics/{topic}")
async def describe_topic(request: web.Request) -> web.Response:
    topic = services_of(request).topics.describe_topic(context_of(request), request.match_info["topic"])
    return render(request, DescribeTopicResponse(
        name=topic.name, topic_id=topic.topic_id, internal=topic.internal, configs=dict(topic.configs),
        partitions=[partition_state(p) for p in topic.partitions]))


@routes.delete("/v1/topics/{topic}")
async def delete_topic(request: web.Request) -> web.Response:
    topic = await services_of(request).topics.delete_topic(context_of(request), request.match_info["topic"])
    return render(request, DeleteTopicResponse(name=topic.name))


@routes.post("/v1/topics/{topic}/partitions")
async def create_partitions(request: web.Request) -> web.Response:
    name = request.match_info["topic"]
    count = (await read_message(request, CreatePartitionsRequest)).count
    topic = await services_of(request).topics.create_partitions(context_of(request), name, count)
    return render(request, CreatePartitionsResponse(name=topic.name, partitions=count))


@routes.get("/v1/topics/{topic}/configs")
async def describe_configs(request: web.Request) -> web.Response:
    configs = services_of(request).topics.describe_configs(context_of(request), request.match_info["topic"])
    return render(request, TopicConfigsResponse(configs=dict(configs.configs), defaults=dict(configs.defaults)))


@routes.patch("/v1/topics/{topic}/configs")
async def alter_configs(request: web.Request) -> web.Response:
    changes = config_strings((await read_message(request, AlterConfigsRequest)).configs)
    configs = await services_of(request).topics.alter_configs(context_of(request), request.match_info["topic"],
                                                              changes)
    return render(request, AlterConfigsResponse(configs=dict(configs)))

"""CreateTopics (key 19, v2-7), DeleteTopics (key 20, v1-6) and CreatePartitions (key 37, v0-3)
over TopicApis, one answer per topic with its error and message. Replica assignments are not
taken (the controller places replicas); validate_only is answered without creating anything."""

from __future__ import annotations

import uuid
from typing import Any

from kraft.errors import KraftError
from kraft.kafka.apis.common import Api, attempt, code, entity, error_of, ms, nested, response_of, topic_uuid
from kraft.metadata.acl import TOPIC
from kraft.server.access import CREATE_TOPICS as CREATE_TOPICS_API, NAMED, rule_of
from kraft.server.metadata import check_topic_name
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
_CREATE = rule_of(CREATE_TOPICS_API, TOPIC, NAMED)
DEFAULT = -1  # num_partitions / replication_factor: the broker's default



def create_topics(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        result_cls = nested(response, "CreatableTopicResult")
        results = []
        for t in request.topics:
            values: dict[str, Any] = dict(name=t.name, topic_id=uuid.UUID(int=0), error_code=code(None),
                                          error_message=None, num_partitions=-1, replication_factor=-1, configs=None)
            try:
                if t.assignments:
                    raise KraftError("INVALID_REQUEST", "manual replica assignments are not supported")
                partitions = None if int(t.num_partitions) == DEFAULT else int(t.num_partitions)
                replication = None if int(t.replication_factor) == DEFAULT else int(t.replication_factor)
                configs = {c.name: c.value for c in t.configs if c.value is not None}
                if request.validate_only:
                    services.authorization.require(ctx, _CREATE, (check_topic_name(t.name, "create"),))
                else:
                    created = await services.topics.create_topic(ctx, t.name, partitions, replication, configs)
                    values.update(topic_id=topic_uuid(created.topic_id), num_partitions=len(created.partitions),
                                  replication_factor=len(created.partitions[0].replicas) if created.partitions else -1)
            except Exception as e:  # noqa: BLE001 - the topic's answer
                error = error_of(e)
                values.update(error_code=code(error.error_code), error_message=error.message)
            results.append(entity(result_cls, **values))
        return entity(response, throttle_time=ms(0), topics=tuple(results))
    return handle


def delete_topics(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        result_cls = nested(response, "DeletableTopicResult")
        names = list(request.topic_names) if hasattr(request, "topic_names") else [t.name for t in request.topics]
        results = []
        for name in names:
            deleted, error = await attempt(lambda name=name: _delete(services, ctx, name))
            results.append(entity(result_cls, name=name, topic_id=uuid.UUID(int=0) if deleted is None else
                                  topic_uuid(deleted.topic_id), error_code=code(error),
                                  error_message=error and error.message))
        return entity(response, throttle_time=ms(0), responses=tuple(results))
    return handle


async def _delete(services: BrokerServices, ctx: RequestContext, name: str | None) -> Any:
    if name is None:
        raise KraftError("INVALID_REQUEST", "deleting a topic by its id is not supported: name it")
    return await services.topics.delete_topic(ctx, name)


def create_partitions(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        result_cls = nested(response, "CreatePartitionsTopicResult")
        results = []
        for t in request.topics:
            _, error = await attempt(lambda t=t: None if request.validate_only else services.topics.create_partitions(
                ctx, t.name, int(t.count)))
            results.append(entity(result_cls, name=t.name, error_code=code(error),
                                  error_message=error and error.message))
        return entity(response, throttle_time=ms(0), results=tuple(results))
    return handle


APIS = (
    Api(CREATE_TOPICS, 2, 7, create_topics, "CreateTopics"),
    Api(DELETE_TOPICS, 1, 6, delete_topics, "DeleteTopics"),
    Api(CREATE_PARTITIONS, 0, 3, create_partitions, "CreatePartitions"),
)

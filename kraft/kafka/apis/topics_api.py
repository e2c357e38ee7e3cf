"""CreateTopics (key 19, v2-7), DeleteTopics (key 20, v1-6) and CreatePartitions (key 37, v0-3)
over TopicApis, one answer per topic with its error and message. CreateTopics takes a manual
replica assignment as Kafka does (partitions 0..n-1, counts -1; the controller checks the
brokers); DeleteTopics v6 names a topic by name or by id (not both); validate_only is answered
without creating anything."""

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
NO_TOPIC_ID = uuid.UUID(int=0)



def create_topics(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        result_cls = nested(response, "CreatableTopicResult")
        results = []
        for t in request.topics:
            values: dict[str, Any] = dict(name=t.name, topic_id=uuid.UUID(int=0), error_code=code(None),
                                          error_message=None, num_partitions=-1, replication_factor=-1, configs=None)
            try:
                assignments = _assignments(t.assignments)
                partitions = None if int(t.num_partitions) == DEFAULT else int(t.num_partitions)
                replication = None if int(t.replication_factor) == DEFAULT else int(t.replication_factor)
                configs = {c.name: c.value for c in t.configs if c.value is not None}
                if request.validate_only:
                    services.authorization.require(ctx, _CREATE, (check_topic_name(t.name, "create"),))
                else:
                    created = await services.topics.create_topic(ctx, t.name, partitions, replication, configs,
                                                                 assignments)
                    values.update(topic_id=topic_uuid(created.topic_id), num_partitions=len(created.partitions),
                                  replication_factor=len(created.partitions[0].replicas) if created.partitions else -1)
            except Exception as e:  # noqa: BLE001 - the topic's answer
                error = error_of(e)
                values.update(error_code=code(error.error_code), error_message=error.message)
            results.append(entity(result_cls, **values))
        return entity(response, throttle_time=ms(0), topics=tuple(results))
    return handle


def _assignments(given: Any) -> list[list[int]] | None:
    """CreateTopics' assignments as partition i's replicas at i; INVALID_REPLICA_ASSIGNMENT unless
    the partitions are 0..n-1, each once (Kafka's rule)."""
    if not given:
        return None
    by_partition = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in given}
    if sorted(by_partition) != list(range(len(given))):
        raise KraftError("INVALID_REPLICA_ASSIGNMENT", "the partitions of a manual assignment must be "
                                                       "0, 1, ... each once")
    return [by_partition[p] for p in range(len(given))]


def delete_topics(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        result_cls = nested(response, "DeletableTopicResult")
        # kio reads the zero UUID (Kafka's "no id") as None
        named = ([(n, NO_TOPIC_ID) for n in request.topic_names] if hasattr(request, "topic_names")
                 else [(t.name, t.topic_id or NO_TOPIC_ID) for t in request.topics])
        results = []
        for name, topic_id in named:
            deleted, error = await attempt(lambda name=name, topic_id=topic_id: _delete(services, ctx, name, topic_id))
            results.append(entity(result_cls, name=name if deleted is None else deleted.name,
                                  topic_id=topic_id if deleted is None else topic_uuid(deleted.topic_id),
                                  error_code=code(error), error_message=error and error.message))
        return entity(response, throttle_time=ms(0), responses=tuple(results))
    return handle


async def _delete(services: BrokerServices, ctx: RequestContext, name: str | None, topic_id: uuid.UUID) -> Any:
    if name is not None and topic_id != NO_TOPIC_ID:
        raise KraftError("INVALID_REQUEST", "name a topic by its name or by its id, not both")
    if name is None:
        name = services.topics.name_of_id(ctx, str(topic_id))
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

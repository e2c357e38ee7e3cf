"""The topic APIs over the metadata view and the admin service (KafkaApis' handlers for Metadata,
CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs and IncrementalAlterConfigs): each
authorizes its API's resources through the request context. Changes go to the active controller
and are answered once this node's metadata shows them.

Metadata lists only the topics the principal may Describe; a named topic it may not is reported
with TOPIC_AUTHORIZATION_FAILED in the answer's topic errors, and with auto-creation asked for
(Kafka's MetadataRequest `allow_auto_topic_creation`, producers send it) a named topic that does
not exist is created with the broker defaults when `auto.create.topics.enable`, by the rule a
produce to it follows (`topic_or_create`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from kraft.errors import KraftError
from kraft.metadata.acl import TOPIC
from kraft.server.access import (
    AUTO_CREATE, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LISTED,
    METADATA, NAMED, rule_of,
)
from kraft.server.admin import AdminService
from kraft.server.authorization import Authorization
from kraft.server.metadata import ClusterDescription, MetadataView, NodeInfo, TopicDescription, check_topic_name
from kraft.server.request_context import RequestContext

_DESCRIBE = rule_of(METADATA, TOPIC, LISTED)
_CREATE = rule_of(CREATE_TOPICS, TOPIC, NAMED)
_DELETE = rule_of(DELETE_TOPICS, TOPIC, NAMED)
_ALTER = rule_of(CREATE_PARTITIONS, TOPIC, NAMED)
_DESCRIBE_CONFIGS = rule_of(DESCRIBE_CONFIGS, TOPIC, NAMED)
_ALTER_CONFIGS = rule_of(INCREMENTAL_ALTER_CONFIGS, TOPIC, NAMED)


@dataclass(frozen=True)
class TopicError:
    name: str
    error: KraftError


@dataclass(frozen=True)
class MetadataResult:
    cluster: ClusterDescription
    topics: list[TopicDescription]
    topic_errors: list[TopicError]


@dataclass(frozen=True)
class TopicConfigs:
    configs: Mapping[str, str]  # the topic's overrides
    defaults: Mapping[str, str]  # the broker's defaults


class TopicApis:
    def __init__(self, node: NodeInfo, view: MetadataView, admin: AdminService, authorization: Authorization) -> None:
        self.node = node
        self.view = view
        self.admin = admin
        self.auth = authorization

    def require_topic(self, name: str) -> TopicDescription:
        """The topic, or UNKNOWN_TOPIC_OR_PARTITION."""
        topic = self.view.topic(check_topic_name(name))
        if topic is None:
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        return topic

    def exists(self, name: str) -> bool:
        """Whether topic `name` exists (an invalid name names none)."""
        return self.view.topic(name) is not None

    async def topic_or_create(self, ctx: RequestContext, api: str, name: str) -> TopicDescription:
        """The topic, auto-created with the broker defaults when auto.create.topics.enable, as
        API `api` allows it (Create on the cluster or the topic)."""
        topic = self.view.topic(check_topic_name(name))
        if topic is not None:
            return topic
        if not self.node.auto_create_topics:
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        self.auth.require(ctx, rule_of(api, TOPIC, NAMED, when=AUTO_CREATE), (name,))
        try:
            return await self.admin.create_topic(name, None, None, {})
        except KraftError as e:
            if e.error_code != "TOPIC_ALREADY_EXISTS":  # lost a race with another creator: fine
                raise
        return self.require_topic(name)

    async def metadata(self, ctx: RequestContext, names: list[str] | None, allow_auto_creation: bool,
                       listener: str | None = None) -> MetadataResult:
        """The cluster (its brokers' endpoints of the Kafka listener `listener`, else the HTTP
        API's) and the topics (`names` None: every topic the principal may Describe)."""
        cluster = self.view.cluster(listener)
        if names is None:
            return MetadataResult(cluster, self.auth.visible(ctx, _DESCRIBE, self.view.topics(), lambda t: t.name), [])
        names = list(dict.fromkeys(check_topic_name(n) for n in names))
        refused = set(self.auth.refused(ctx, _DESCRIBE, names))
        topics: list[TopicDescription] = []
        errors: list[TopicError] = []
        for name in names:
            if name in refused:
                errors.append(TopicError(name, self.auth.failure(ctx, _DESCRIBE.operation, TOPIC, (name,))))
                continue
            found = self.view.topic(name)
            if found is None:
                try:
                    found = await self._auto_create(ctx, name, allow_auto_creation)
                except KraftError as e:
                    errors.append(TopicError(name, e))
                    continue
            topics.append(found)
        return MetadataResult(cluster, topics, errors)

    async def _auto_create(self, ctx: RequestContext, name: str, asked: bool) -> TopicDescription:
        if not asked:
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        if not self.node.auto_create_topics:
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION",
                             f"topic {name!r} does not exist and auto.create.topics.enable is false on this broker")
        check_topic_name(name, "create")  # internal topics are created by their owners, with their settings
        return await self.topic_or_create(ctx, METADATA, name)

    def list_topics(self, ctx: RequestContext) -> list[TopicDescription]:
        """Every topic the principal may Describe, by name."""
        return self.auth.visible(ctx, _DESCRIBE, sorted(self.view.topics(), key=lambda t: t.name), lambda t: t.name)

    def describe_topic(self, ctx: RequestContext, name: str) -> TopicDescription:
        self.auth.require(ctx, _DESCRIBE, (name,))
        return self.require_topic(name)

    async def create_topic(self, ctx: RequestContext, name: str, partitions: int | None,
                           replication_factor: int | None, configs: Mapping[str, str],
                           assignments: list[list[int]] | None = None) -> TopicDescription:
        """`assignments`: partition i's replicas at i, placed by hand (Kafka's manual assignment)."""
        name = check_topic_name(name, "create")
        self.auth.require(ctx, _CREATE, (name,))
        return await self.admin.create_topic(name, partitions, replication_factor, configs, assignments)

    def name_of_id(self, ctx: RequestContext, topic_id: str) -> str:
        """The name of the topic whose id is `topic_id` (DeleteTopics by id): UNKNOWN_TOPIC_ID when
        no topic has it, TOPIC_AUTHORIZATION_FAILED naming the id only when the principal may not
        describe the topic (Kafka's rule: the name is not given away)."""
        found = next((t for t in self.view.topics() if t.topic_id == topic_id), None)
        if found is None:  # as Kafka: whether the id never existed or its topic is gone
            raise KraftError("UNKNOWN_TOPIC_ID", f"no topic has the id {topic_id}")
        if not self.auth.permits(ctx, _DESCRIBE, found.name):
            raise self.auth.failure(ctx, _DESCRIBE.operation, TOPIC, [topic_id])
        return found.name

    async def delete_topic(self, ctx: RequestContext, name: str) -> TopicDescription:
        self.auth.require(ctx, _DELETE, (name,))
        topic = self.require_topic(check_topic_name(name, "delete"))
        await self.admin.delete_topic(topic.name)
        return topic

    async def create_partitions(self, ctx: RequestContext, name: str, count: int) -> TopicDescription:
        """Grows the topic to `count` partitions; the topic as it was."""
        # the group coordinator's hashing fixes __consumer_offsets' partition count for good
        self.auth.require(ctx, _ALTER, (name,))
        topic = self.require_topic(check_topic_name(name, "add partitions to"))
        await self.admin.create_partitions(topic.name, count)
        return topic

    def describe_configs(self, ctx: RequestContext, name: str) -> TopicConfigs:
        self.auth.require(ctx, _DESCRIBE_CONFIGS, (name,))
        return TopicConfigs(self.require_topic(name).configs, self.view.topic_defaults())

    async def alter_configs(self, ctx: RequestContext, name: str, changes: Mapping[str, str | None]) -> Mapping[str, str]:
        """Sets (or with None removes) the topic's overrides; the overrides now."""
        self.auth.require(ctx, _ALTER_CONFIGS, (name,))
        topic = self.require_topic(name)
        await self.admin.alter_configs(topic.name, changes)
        return self.require_topic(topic.name).configs

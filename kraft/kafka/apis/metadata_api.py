"""Metadata (key 3) and DescribeCluster (key 60): the brokers as they registered the listener the
request came in on (Kafka advertises each listener's own endpoints), the controller, and the
topics the principal may Describe, auto-created by Metadata when the client allows it and the
broker does (TopicApis.metadata)."""

from __future__ import annotations

import uuid
from typing import Any

from kraft.kafka.apis.common import Api, code, entity, ms, nested, response_of, topic_uuid
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

METADATA, DESCRIBE_CLUSTER = 3, 60



def metadata(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        topic_cls, partition_cls, broker_cls = (nested(response, n) for n in (
            "MetadataResponseTopic", "MetadataResponsePartition", "MetadataResponseBroker"))
        requested = request.topics
        # v0: an empty list asks for every topic; v1+: null does
        names = None if requested is None or (ctx.api_version == 0 and not requested) else [
            t.name for t in requested if t.name is not None]
        allow = getattr(request, "allow_auto_topic_creation", True)
        result = await services.topics.metadata(ctx, names, allow, ctx.listener_name)
        topics = [entity(
            topic_cls, error_code=code(None), name=t.name, topic_id=topic_uuid(t.topic_id), is_internal=t.internal,
            partitions=tuple(entity(
                partition_cls, error_code=code(None if p.leader >= 0 else "LEADER_NOT_AVAILABLE"),
                partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
                replica_nodes=tuple(p.replicas), isr_nodes=tuple(p.isr), offline_replicas=())
                for p in t.partitions))
            for t in result.topics]
        topics += [entity(topic_cls, error_code=code(e.error.error_code), name=e.name, topic_id=uuid.UUID(int=0),
                          is_internal=False, partitions=()) for e in result.topic_errors]
        cluster = result.cluster
        return entity(
            response, throttle_time=ms(0),
            brokers=tuple(entity(broker_cls, node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                          for b in cluster.brokers),
            cluster_id=cluster.cluster_id or None, controller_id=cluster.controller_id, topics=tuple(topics))
    return handle


def describe_cluster(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        broker_cls = nested(response, "DescribeClusterBroker")
        cluster = services.metadata.cluster(ctx.listener_name)
        return entity(
            response, throttle_time=ms(0), error_code=code(None), error_message=None, endpoint_type=1,
            cluster_id=cluster.cluster_id, controller_id=cluster.controller_id,
            brokers=tuple(entity(broker_cls, broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                          for b in cluster.brokers),
            cluster_authorized_operations=-2147483648)
    return handle


APIS = (
    Api(METADATA, 0, 12, metadata, "Metadata"),
    Api(DESCRIBE_CLUSTER, 0, 1, describe_cluster, "DescribeCluster"),
)

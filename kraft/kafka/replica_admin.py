"""DescribeLogDirs and DescribeProducers over the replica admin service
(kraft/server/replica_admin.py): what this broker's replicas hold. Clients send them to each
broker they ask about.

DescribeLogDirs before v3 has no top-level error: a principal without Describe on the cluster
gets no directories there, as Kafka answers; v3+ carries CLUSTER_AUTHORIZATION_FAILED. A current
replica's `is_future_key` is false (kraft moves no replica between directories).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping

from kraft.errors import KraftError
from kraft.kafka.entities import error_fields
from kraft.kafka.handling import KafkaApi
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

DESCRIBE_LOG_DIRS, DESCRIBE_PRODUCERS = 35, 61
_TOP_LEVEL_ERROR_VERSION = 3


async def describe_log_dirs(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    wanted = None if request.topics is None else {t.topic: [int(p) for p in t.partitions] for t in request.topics}
    try:
        dirs = await services.replicas.describe_log_dirs(ctx, wanted)
    except KraftError:
        if ctx.api_version >= _TOP_LEVEL_ERROR_VERSION:
            raise
        return {"results": []}
    results = []
    for d in dirs:
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for p in d.partitions:
            topics[p.topic].append({"partition_index": p.partition, "partition_size": p.size,
                                    "offset_lag": p.offset_lag, "is_future_key": False})
        results.append({"error_code": error_fields(d.error)["error_code"], "log_dir": d.path,
                        "topics": [{"name": name, "partitions": parts} for name, parts in sorted(topics.items())],
                        "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes})
    return {**error_fields(None), "results": results}


async def describe_producers(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    wanted = [(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for answer in await services.replicas.describe_producers(ctx, wanted):
        topics[answer.topic].append({"partition_index": answer.partition, **error_fields(answer.error),
                                     "active_producers": [{
                                         "producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                                         "last_sequence": p.last_sequence, "last_timestamp": p.last_timestamp,
                                         "coordinator_epoch": p.coordinator_epoch,
                                         "current_txn_start_offset": p.current_txn_start_offset}
                                         for p in answer.producers]})
    return {"topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


APIS = (
    KafkaApi(DESCRIBE_LOG_DIRS, 1, 4, describe_log_dirs),
    KafkaApi(DESCRIBE_PRODUCERS, 0, 0, describe_producers),
)

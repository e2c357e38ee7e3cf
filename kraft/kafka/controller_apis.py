"""DescribeQuorum, ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments over
the controller services (kraft/server/controller_apis.py), which any broker accepts and runs on
the active controller (forwarding there when it is not the one).

DescribeQuorum answers KIP-595's shape for `__cluster_metadata-0` from the quorum's state (the
leader, its epoch, the high watermark, each voter's and observer's log end offset and fetch
times, in metadata offsets); any other partition is UNKNOWN_TOPIC_OR_PARTITION. ElectLeaders
runs preferred elections (ELECTION_NOT_NEEDED for a partition already led by its preferred
replica); an unclean election is INVALID_REQUEST: kraft elects outside the ISR only where the
topic's `unclean.leader.election.enable` allows it. A reassignment plan is applied all or none:
a plan error (UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT,
NO_REASSIGNMENT_IN_PROGRESS, INVALID_REQUEST) is every partition's answer, and a request error
(authorization, no controller) the top-level one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping

from kraft.errors import KraftError
from kraft.kafka.entities import error_fields
from kraft.kafka.handling import KafkaApi
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

DESCRIBE_QUORUM, ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 55, 43, 45, 46

METADATA_TOPIC, METADATA_PARTITION = "__cluster_metadata", 0
PREFERRED, UNCLEAN = 0, 1  # Kafka's ElectionType
PLAN_ERRORS = frozenset({"UNKNOWN_TOPIC_OR_PARTITION", "INVALID_REPLICA_ASSIGNMENT", "NO_REASSIGNMENT_IN_PROGRESS",
                         "INVALID_REQUEST"})


def _replicas(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"replica_id": r["node_id"], "replica_directory_id": None, "log_end_offset": r["log_end_offset"],
             "last_fetch_timestamp": r["last_fetch_timestamp"],
             "last_caught_up_timestamp": r["last_caught_up_timestamp"]} for r in rows]


async def describe_quorum(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    wanted = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    quorum = None
    if (METADATA_TOPIC, METADATA_PARTITION) in wanted:
        quorum = await services.controller.describe_quorum(ctx)
    topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for topic, partition in wanted:
        if quorum is None or (topic, partition) != (METADATA_TOPIC, METADATA_PARTITION):
            error = KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic}-{partition} is not the metadata log")
            topics[topic].append({"partition_index": partition, **error_fields(error), "leader_id": -1,
                                  "leader_epoch": -1, "high_watermark": -1, "current_voters": [], "observers": []})
            continue
        rows = quorum["replication"]
        topics[topic].append({
            "partition_index": partition, **error_fields(None), "leader_id": quorum["leader_id"],
            "leader_epoch": quorum["leader_epoch"], "high_watermark": quorum["high_watermark"],
            "current_voters": _replicas(r for r in rows if r["status"] != "Observer"),
            "observers": _replicas(r for r in rows if r["status"] == "Observer")})
    return {**error_fields(None), "topics": [{"topic_name": t, "partitions": p} for t, p in topics.items()],
            "nodes": []}


def _by_topic(results: Iterable[tuple[str, dict[str, Any]]], topic_key: str = "name",
              partitions_key: str = "partitions") -> list[dict[str, Any]]:
    """Per-partition answers grouped under their topics, in the order the topics come."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for topic, partition in results:
        grouped[topic].append(partition)
    return [{topic_key: topic, partitions_key: partitions} for topic, partitions in grouped.items()]


async def elect_leaders(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    if getattr(request, "election_type", PREFERRED) != PREFERRED:
        raise KraftError("INVALID_REQUEST", "only preferred leader elections are run: kraft elects outside the "
                                            "ISR where the topic's unclean.leader.election.enable allows it")
    wanted = None if request.topic_partitions is None else [
        (t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    answer = await services.controller.elect_leaders(ctx, wanted, None)
    results = []
    for r in answer.get("partitions", []):
        error = KraftError(r["error_code"], r.get("message", "")) if r.get("error_code") else None
        results.append((r["topic"], {"partition_id": r["partition"], **error_fields(error)}))
    return {**error_fields(None), "replica_election_results": _by_topic(results, "topic", "partition_result")}


async def alter_partition_reassignments(services: BrokerServices, ctx: RequestContext,
                                        request: Any) -> Mapping[str, Any]:
    plan = [{"topic": t.name, "partition": int(p.partition_index),
             "replicas": None if p.replicas is None else [int(b) for b in p.replicas]}
            for t in request.topics for p in t.partitions]
    outcome: KraftError | None = None
    try:
        await services.controller.alter_partition_reassignments(ctx, plan, None)
    except KraftError as e:
        if e.error_code not in PLAN_ERRORS:
            raise
        outcome = e
    return {**error_fields(None), "responses": _by_topic(
        ((p["topic"], {"partition_index": p["partition"], **error_fields(outcome)}) for p in plan))}


async def list_partition_reassignments(services: BrokerServices, ctx: RequestContext,
                                       request: Any) -> Mapping[str, Any]:
    wanted = None if request.topics is None else {
        (t.name, int(p)) for t in request.topics for p in t.partition_indexes}
    answer = await services.controller.list_partition_reassignments(ctx)
    return {**error_fields(None), "topics": _by_topic((
        (r["topic"], {"partition_index": r["partition"], "replicas": r["replicas"],
                      "adding_replicas": r["adding_replicas"], "removing_replicas": r["removing_replicas"]})
        for r in answer.get("partitions", []) if wanted is None or (r["topic"], r["partition"]) in wanted))}


APIS = (
    KafkaApi(DESCRIBE_QUORUM, 0, 2, describe_quorum),
    KafkaApi(ELECT_LEADERS, 0, 2, elect_leaders),
    KafkaApi(ALTER_PARTITION_REASSIGNMENTS, 0, 1, alter_partition_reassignments),
    KafkaApi(LIST_PARTITION_REASSIGNMENTS, 0, 0, list_partition_reassignments),
)

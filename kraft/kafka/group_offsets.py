"""OffsetCommit, OffsetFetch and OffsetDelete: a group's committed offsets over the Kafka protocol,
thin adapters over the group service (the same offsets HTTP and the CLI read and write).

- OffsetCommit v2-v9: a classic member commits with its generation id, a KIP-848 member with its
  member epoch (the same field since v9); -1 with no member for a group without members (admin
  tools, assign-only consumers). A commit the group refuses (Read on the group, the member's
  generation) answers its error for every partition; a topic the principal may not Read answers
  TOPIC_AUTHORIZATION_FAILED on its partitions and the others are committed (Kafka's rule).
  `committed_leader_epoch` and v2-v4's `retention_time_ms` are not kept (offsets.retention.minutes
  decides).
- OffsetFetch v1-v9 (v8+: several groups in one request): a partition without a committed offset
  answers offset -1; a group the principal may not Describe is GROUP_AUTHORIZATION_FAILED (the
  group's error); topics it may not Describe are left out of a fetch of all offsets and, named,
  answer TOPIC_AUTHORIZATION_FAILED with offset -1 on their partitions (KafkaApis.fetchOffsetsForGroup);
  v7+'s require_stable answers a partition with an undecided transactional offset
  UNSTABLE_OFFSET_COMMIT.
- OffsetDelete v0.
"""

from __future__ import annotations

from typing import Any, Mapping

from kraft.errors import KraftError
from kraft.kafka.entities import error_code
from kraft.kafka.handling import KafkaApi
from kraft.server.groups import OffsetCommitEntry
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
OFFSET_DELETE = 47

NO_OFFSET = -1


def _by_topic(entries: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """[(topic, partition entry)] -> Kafka's topics, each with its partitions, in order."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in entries:
        topics.setdefault(topic, []).append(partition)
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]


async def offset_commit(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    entries = [OffsetCommitEntry(t.name, p.partition_index, p.committed_offset, p.committed_metadata or "")
               for t in request.topics for p in t.partitions]
    errors: dict[tuple[str, int], str | KraftError | None] = {}
    try:
        committed = await services.groups.commit_offsets(ctx, request.group_id, request.member_id,
                                                         request.generation_id_or_member_epoch, entries,
                                                         getattr(request, "group_instance_id", None))
    except KraftError as e:  # the group's refusal or error: every partition's
        errors = {(entry.topic, entry.partition): e for entry in entries}
    else:
        errors = {(o.topic, o.partition): o.error_code for o in committed.offsets}
    return {"topics": _by_topic([(e.topic, {"partition_index": e.partition,
                                            "error_code": error_code(errors.get((e.topic, e.partition)))})
                                 for e in entries])}


async def _group_offsets(services: BrokerServices, ctx: RequestContext, group_id: str,
                         requested: Any, require_stable: bool) -> dict[str, Any]:
    """One group's answer: its topics and error. `require_stable` (v7+, KIP-447: a read_committed
    consumer): a partition whose transactional offset waits for its transaction's end answers
    UNSTABLE_OFFSET_COMMIT (retriable), not the offset before it."""
    names = None if requested is None else [t.name for t in requested]
    try:
        fetched = await services.groups.fetch_offsets(ctx, group_id, names)
    except KraftError as e:
        return {"topics": (), "error_code": error_code(e)}
    committed = {(o.topic, o.partition): o for o in fetched.offsets}
    unstable = set(fetched.unstable) if require_stable else set()
    if requested is None:
        wanted = sorted(committed.keys() | unstable)
    else:
        wanted = [(t.name, int(p)) for t in requested for p in t.partition_indexes]
    refused = set(fetched.refused)
    entries = []
    for topic, p in wanted:
        error = "TOPIC_AUTHORIZATION_FAILED" if topic in refused else \
            "UNSTABLE_OFFSET_COMMIT" if (topic, p) in unstable else None
        o = None if error else committed.get((topic, p))
        entries.append((topic, {"partition_index": p, "committed_offset": NO_OFFSET if o is None else o.offset,
                                "committed_leader_epoch": -1, "metadata": "" if o is None else o.metadata,
                                "error_code": error_code(error)}))
    return {"topics": _by_topic(entries), "error_code": error_code(None)}


async def offset_fetch(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    require_stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version >= 8:
        return {"groups": [{"group_id": g.group_id,
                            **await _group_offsets(services, ctx, g.group_id, g.topics, require_stable)}
                           for g in request.groups]}
    return await _group_offsets(services, ctx, request.group_id, request.topics, require_stable)


async def offset_delete(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    topics = [(t.name, tuple(int(p.partition_index) for p in t.partitions)) for t in request.topics]
    result = await services.groups.delete_offsets(ctx, request.group_id, topics)
    return {"error_code": error_code(None), "topics": _by_topic([
        (entry.topic, {"partition_index": entry.partition, "error_code": error_code(entry.error_code)})
        for entry in result.partitions])}


APIS = (
    KafkaApi(OFFSET_COMMIT, 2, 9, offset_commit),
    KafkaApi(OFFSET_FETCH, 1, 9, offset_fetch),
    KafkaApi(OFFSET_DELETE, 0, 0, offset_delete),
)

"""OffsetCommit, OffsetFetch and OffsetDelete: a group's committed offsets over the Kafka protocol,
thin adapters over the group service (the same offsets HTTP and the CLI read and write).

- OffsetCommit v2-v9: a classic member commits with its generation id, a KIP-848 member with its
  member epoch (the same field since v9); -1 with no member for a group without members (admin
  tools, assign-only consumers). A refused commit answers its error for every partition.
  `committed_leader_epoch` and v2-v4's `retention_time_ms` are not kept (offsets.retention.minutes
  decides).
- OffsetFetch v1-v9 (v8+: several groups in one request): a partition without a committed offset
  answers offset -1; topics the principal may not Describe are left out of a fetch of all offsets.
- OffsetDelete v0.
"""

from __future__ import annotations

from typing import Any

from kraft.errors import KraftError
from kraft.kafka.answers import answer, build, error_code, nested_type, response_type
from kraft.kafka.dispatch import HandlerRegistry
from kraft.server.group_apis import GroupApis
from kraft.server.groups import OffsetCommitEntry
from kraft.server.request_context import RequestContext

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
OFFSET_DELETE = 47

NO_OFFSET = -1


class GroupOffsetHandlers:
    def __init__(self, groups: GroupApis) -> None:
        self.groups = groups

    def register(self, registry: HandlerRegistry) -> None:
        registry.register_all({OFFSET_COMMIT: (2, 9, self.offset_commit), OFFSET_FETCH: (1, 9, self.offset_fetch),
                               OFFSET_DELETE: (0, 0, self.offset_delete)})

    async def offset_commit(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        entries = [OffsetCommitEntry(t.name, p.partition_index, p.committed_offset, p.committed_metadata or "")
                   for t in request.topics for p in t.partitions]
        error = None
        try:
            await self.groups.commit_offsets(ctx, request.group_id, request.member_id,
                                             request.generation_id_or_member_epoch, entries,
                                             getattr(request, "group_instance_id", None))
        except KraftError as e:
            error = e
        schema = response_type(OFFSET_COMMIT, version)
        topic = nested_type(schema, "topics")
        partition = nested_type(topic, "partitions")
        return answer(OFFSET_COMMIT, version, topics=tuple(
            topic(name=t.name, partitions=tuple(
                partition(partition_index=p.partition_index, error_code=error_code(error)) for p in t.partitions))
            for t in request.topics))

    async def offset_fetch(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        if version >= 8:
            group_type = nested_type(response_type(OFFSET_FETCH, version), "groups")
            groups = []
            for g in request.groups:
                topics, error = await self._fetch(ctx, g.group_id, g.topics, version, group_type)
                groups.append(group_type(group_id=g.group_id, topics=topics, error_code=error_code(error)))
            return answer(OFFSET_FETCH, version, groups=tuple(groups))
        topics, error = await self._fetch(ctx, request.group_id, request.topics, version,
                                          response_type(OFFSET_FETCH, version))
        return answer(OFFSET_FETCH, version, topics=topics, error_code=error_code(error))

    async def _fetch(self, ctx: RequestContext, group_id: str, requested: Any, version: int,
                     parent: type[Any]) -> tuple[tuple[Any, ...], KraftError | None]:
        """The topics answer of one group (kio's types under `parent`), and the group's error."""
        topic_type = nested_type(parent, "topics")
        partition_type = nested_type(topic_type, "partitions")
        names = None if requested is None else [t.name for t in requested]
        try:
            fetched = await self.groups.fetch_offsets(ctx, group_id, names)
        except KraftError as e:
            if e.error_code != "GROUP_ID_NOT_FOUND":
                return (), e
            fetched = None  # no group: every requested partition has no offset, as Kafka answers
        committed = {} if fetched is None else {(o.topic, o.partition): o for o in fetched.offsets}
        if requested is None:
            wanted = sorted(committed)
        else:
            wanted = [(t.name, int(p)) for t in requested for p in t.partition_indexes]
        by_topic: dict[str, list[Any]] = {}
        for topic, p in wanted:
            o = committed.get((topic, p))
            by_topic.setdefault(topic, []).append(build(
                partition_type, partition_index=p, committed_offset=NO_OFFSET if o is None else o.offset,
                committed_leader_epoch=-1, metadata="" if o is None else o.metadata, error_code=error_code(None)))
        return tuple(topic_type(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()), None

    async def offset_delete(self, ctx: RequestContext, request: Any) -> Any:
        topics = [(t.name, tuple(int(p.partition_index) for p in t.partitions)) for t in request.topics]
        schema = response_type(OFFSET_DELETE, ctx.api_version)
        topic_type = nested_type(schema, "topics")
        partition_type = nested_type(topic_type, "partitions")
        try:
            result = await self.groups.delete_offsets(ctx, request.group_id, topics)
        except KraftError as e:
            return answer(OFFSET_DELETE, ctx.api_version, error_code=error_code(e), topics=())
        by_topic: dict[str, list[Any]] = {}
        for entry in result.partitions:
            by_topic.setdefault(entry.topic, []).append(
                partition_type(partition_index=entry.partition, error_code=error_code(entry.error_code)))
        return answer(OFFSET_DELETE, ctx.api_version, error_code=error_code(None), topics=tuple(
            topic_type(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))

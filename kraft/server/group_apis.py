"""The consumer group APIs over the group coordinator (KafkaApis' handlers for FindCoordinator,
ConsumerGroupHeartbeat, ConsumerGroupDescribe, OffsetCommit, OffsetFetch, OffsetDelete,
ListGroups and DeleteGroups): each authorizes its API's resources through the request context.

Requests for a group go to its coordinator (the leader of its `__consumer_offsets` partition);
another broker answers NOT_COORDINATOR naming it. A member may subscribe by name only to topics it
may Describe (a regex resolves to those, as the coordinator filters with the member's principal
and address); a group description is refused unless its members' topics may be described, and
committed offsets of topics the principal may not Describe are left out of descriptions and
offset fetches, as Kafka leaves them out. Offset resets are commits (OffsetCommit's rules).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kraft.errors import KraftError
from kraft.metadata.acl import GROUP, TOPIC
from kraft.broker.groups.classic import JoinRequest, JoinResult
from kraft.server.access import (
    CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT, DELETE_GROUPS, DESCRIBE_GROUPS, FIND_COORDINATOR,
    GROUP_COORDINATOR, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, LIST_GROUPS, LISTED, NAMED, OFFSET_COMMIT, OFFSET_DELETE,
    OFFSET_FETCH, SYNC_GROUP, Rule, rule_of,
)
from kraft.server.authorization import Authorization
from kraft.server.groups import (
    CommitOffsetsResult, DeleteGroupResult, DeleteOffsetsResult, FetchOffsetsResult, FindCoordinatorResult,
    ClassicDescription, GroupDescription, GroupHeartbeat, GroupService, HeartbeatResult, ListGroupsResult,
    OffsetCommitEntry, OffsetReset, ResetOffsetsResult, commit_per_partition,
)
from kraft.server.request_context import RequestContext

_FIND = rule_of(FIND_COORDINATOR, GROUP, NAMED, GROUP_COORDINATOR)
_JOIN = rule_of(CONSUMER_GROUP_HEARTBEAT, GROUP, NAMED)
_SUBSCRIBE = rule_of(CONSUMER_GROUP_HEARTBEAT, TOPIC, NAMED)
_DESCRIBE = rule_of(CONSUMER_GROUP_DESCRIBE, GROUP, NAMED)
_DESCRIBE_MEMBER_TOPICS = rule_of(CONSUMER_GROUP_DESCRIBE, TOPIC, NAMED)
_DESCRIBE_OFFSETS = rule_of(CONSUMER_GROUP_DESCRIBE, TOPIC, LISTED)
_COMMIT = rule_of(OFFSET_COMMIT, GROUP, NAMED)
_COMMIT_TOPICS = rule_of(OFFSET_COMMIT, TOPIC, NAMED)
_FETCH = rule_of(OFFSET_FETCH, GROUP, NAMED)
_FETCH_TOPICS = rule_of(OFFSET_FETCH, TOPIC, LISTED)
_DELETE_OFFSETS = rule_of(OFFSET_DELETE, GROUP, NAMED)
_DELETE_OFFSETS_TOPICS = rule_of(OFFSET_DELETE, TOPIC, NAMED)
_LIST = rule_of(LIST_GROUPS, GROUP, LISTED)
_DELETE = rule_of(DELETE_GROUPS, GROUP, NAMED)
_JOIN_CLASSIC = rule_of(JOIN_GROUP, GROUP, NAMED)
_SYNC = rule_of(SYNC_GROUP, GROUP, NAMED)
_HEARTBEAT = rule_of(HEARTBEAT, GROUP, NAMED)
_LEAVE = rule_of(LEAVE_GROUP, GROUP, NAMED)
_DESCRIBE_CLASSIC = rule_of(DESCRIBE_GROUPS, GROUP, NAMED)


def topic_refusal(auth: Authorization, ctx: RequestContext, rule: Rule,
                  offsets: list[OffsetCommitEntry]) -> Callable[[OffsetCommitEntry], str | None]:
    """A commit's per-topic Read check (Kafka's filterByAuthorized): TOPIC_AUTHORIZATION_FAILED
    for the entries of a refused topic, the denial logged and counted once for the request."""
    refused = set(auth.refused(ctx, rule, {e.topic for e in offsets}))
    if not refused:
        return lambda entry: None
    error = auth.failure(ctx, rule.operation, TOPIC, refused).error_code
    return lambda entry: error if entry.topic in refused else None


class GroupApis:
    def __init__(self, groups: GroupService | None, authorization: Authorization) -> None:
        """Without `groups` (a node that runs no coordinator) every call is COORDINATOR_NOT_AVAILABLE."""
        self._groups = groups
        self.auth = authorization

    @property
    def groups(self) -> GroupService:
        if self._groups is None:
            raise KraftError("COORDINATOR_NOT_AVAILABLE", "this node runs no group coordinator")
        return self._groups

    async def find_coordinator(self, ctx: RequestContext, group_id: str) -> FindCoordinatorResult:
        self.auth.require(ctx, _FIND, (group_id,))
        return await self.groups.find_coordinator(group_id)

    async def heartbeat(self, ctx: RequestContext, group_id: str, request: GroupHeartbeat) -> HeartbeatResult:
        """The member's host and principal are the context's: a regex subscription resolves to
        the topics they may Describe."""
        self.auth.require(ctx, _JOIN, (group_id,))
        if request.subscribed_topics:
            self.auth.require(ctx, _SUBSCRIBE, request.subscribed_topics)
        request = dataclasses.replace(request, client_host=ctx.client_address, principal=ctx.principal)
        return await self.groups.heartbeat(group_id, request)

    async def commit_offsets(self, ctx: RequestContext, group_id: str, member_id: str, member_epoch: int,
                             offsets: list[OffsetCommitEntry], group_instance_id: str | None = None
                             ) -> CommitOffsetsResult:
        """`member_epoch`: a classic member's generation id. Kafka's handleOffsetCommitRequest:
        Read on the group, else the whole commit is refused; a topic the principal may not Read
        answers its partitions TOPIC_AUTHORIZATION_FAILED and the others are committed."""
        self.auth.require(ctx, _COMMIT, (group_id,))
        return await commit_per_partition(
            offsets, topic_refusal(self.auth, ctx, _COMMIT_TOPICS, offsets),
            lambda allowed: self.groups.commit_offsets(group_id, member_id, member_epoch, allowed, group_instance_id))

    async def fetch_offsets(self, ctx: RequestContext, group_id: str, topics: list[str] | None) -> FetchOffsetsResult:
        """Describe on the group; topics the principal may not Describe are left out of a fetch
        of all offsets and, named, answered in `refused` (KafkaApis.fetchOffsetsForGroup)."""
        self.auth.require(ctx, _FETCH, (group_id,))
        refused = [] if topics is None else self.auth.refused(ctx, _FETCH_TOPICS, topics)
        if refused:
            self.auth.failure(ctx, _FETCH_TOPICS.operation, TOPIC, refused)
            topics = [t for t in topics or () if t not in refused]
        answer = await self.groups.fetch_offsets(group_id, topics)
        return dataclasses.replace(
            answer, offsets=tuple(self.auth.visible(ctx, _FETCH_TOPICS, answer.offsets, lambda o: o.topic)),
            unstable=tuple(self.auth.visible(ctx, _FETCH_TOPICS, answer.unstable, lambda tp: tp[0])),
            refused=tuple(refused))

    async def list_groups(self, ctx: RequestContext) -> ListGroupsResult:
        """Describe on the cluster lists all, else the groups the principal may Describe."""
        answer = await self.groups.list_groups()
        return dataclasses.replace(answer, groups=tuple(self.auth.visible(ctx, _LIST, answer.groups, lambda g: g.group_id)))

    async def describe_group(self, ctx: RequestContext, group_id: str) -> GroupDescription:
        self.auth.require(ctx, _DESCRIBE, (group_id,))
        answer = await self.groups.describe_group(group_id)
        self.auth.require(ctx, _DESCRIBE_MEMBER_TOPICS, set().union(*(m.topics() for m in answer.members)))
        return dataclasses.replace(answer, offsets=tuple(
            self.auth.visible(ctx, _DESCRIBE_OFFSETS, answer.offsets, lambda o: o.topic)))

    async def delete_group(self, ctx: RequestContext, group_id: str) -> DeleteGroupResult:
        self.auth.require(ctx, _DELETE, (group_id,))
        return await self.groups.delete_group(group_id)

    async def reset_offsets(self, ctx: RequestContext, group_id: str, reset: OffsetReset) -> ResetOffsetsResult:
        self.auth.require(ctx, _COMMIT, (group_id,))
        self.auth.require(ctx, _COMMIT_TOPICS, reset.topics)
        return await self.groups.reset_offsets(group_id, reset)

    async def delete_offsets(self, ctx: RequestContext, group_id: str,
                             topics: list[tuple[str, tuple[int, ...] | None]]) -> DeleteOffsetsResult:
        self.auth.require(ctx, _DELETE_OFFSETS, (group_id,))
        self.auth.require(ctx, _DELETE_OFFSETS_TOPICS, {t for t, _ in topics})
        return await self.groups.delete_offsets(group_id, topics)

    # -- the classic group protocol (Read on the group, as Kafka's)

    async def join_group(self, ctx: RequestContext, group_id: str, request: JoinRequest) -> JoinResult:
        self.auth.require(ctx, _JOIN_CLASSIC, (group_id,))
        return await self.groups.join_group(group_id, request)

    async def sync_group(self, ctx: RequestContext, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> bytes:
        self.auth.require(ctx, _SYNC, (group_id,))
        return await self.groups.sync_group(group_id, member_id, group_instance_id, generation_id, protocol_type,
                                            protocol_name, assignments)

    async def classic_heartbeat(self, ctx: RequestContext, group_id: str, member_id: str,
                                group_instance_id: str | None, generation_id: int) -> None:
        self.auth.require(ctx, _HEARTBEAT, (group_id,))
        await self.groups.classic_heartbeat(group_id, member_id, group_instance_id, generation_id)

    async def leave_group(self, ctx: RequestContext, group_id: str,
                          members: list[tuple[str, str | None]]) -> list[str | None]:
        self.auth.require(ctx, _LEAVE, (group_id,))
        return await self.groups.leave_group(group_id, members)

    async def describe_classic(self, ctx: RequestContext, group_id: str) -> ClassicDescription:
        """Kafka's DescribeGroups: Describe on the group."""
        self.auth.require(ctx, _DESCRIBE_CLASSIC, (group_id,))
        return await self.groups.describe_classic(group_id)

"""Consumer group routes (KIP-848 heartbeat, offset commit/fetch, list, describe, delete, reset)
and the `GroupService` interface they call (implemented by `kraft.broker.groups.coordinator`).

Requests for a group go to its coordinator (the leader of its `__consumer_offsets` partition);
another broker answers NOT_COORDINATOR naming it (`GET /v1/groups/{group}/coordinator` finds
it). Bodies and answers are the messages of api/messages/groups.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError, invalid_request
from kraft.api.messages.common import GroupId, check_topic_name
from kraft.api.messages.groups import (
    CommitOffsetsRequest, DeleteOffsetsRequest, FetchOffsetsQuery, HeartbeatRequest, ResetOffsetsRequest,
)
from kraft.api.security import principal_of
from kraft.api.wire import read_message, read_query, render

routes = web.RouteTableDef()


@dataclass(frozen=True)
class GroupHeartbeat:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: frozenset[tuple[str, int]] | None
    rebalance_timeout_ms: int
    principal: str = ""  # with client_host, whose Describe rights a regex subscription resolves with


@dataclass(frozen=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    metadata: str


@dataclass(frozen=True)
class OffsetReset:
    topics: tuple[str, ...]
    partitions: tuple[int, ...] | None  # None: every partition of the topics
    strategy: str  # one of api.messages.groups.STRATEGIES
    value: int | None  # offset, timestamp ms or shift
    dry_run: bool


class GroupService(Protocol):
    async def find_coordinator(self, group_id: str) -> dict[str, Any]: ...

    async def heartbeat(self, group_id: str, request: GroupHeartbeat) -> dict[str, Any]: ...

    async def commit_offsets(
        self, group_id: str, member_id: str, member_epoch: int, offsets: list[OffsetCommitEntry]
    ) -> dict[str, Any]: ...

    async def fetch_offsets(self, group_id: str, topics: list[str] | None) -> dict[str, Any]: ...

    async def list_groups(self) -> dict[str, Any]: ...

    async def describe_group(self, group_id: str) -> dict[str, Any]: ...

    async def delete_group(self, group_id: str) -> dict[str, Any]: ...

    async def reset_offsets(self, group_id: str, reset: OffsetReset) -> dict[str, Any]: ...

    async def delete_offsets(self, group_id: str, topics: list[tuple[str, tuple[int, ...] | None]]) -> dict[str, Any]: ...


GROUPS = web.AppKey("group_service", GroupService)


def _service(request: web.Request) -> GroupService:
    service = request.app.get(GROUPS)
    if service is None:
        raise KraftError("COORDINATOR_NOT_AVAILABLE", "this node runs no group coordinator")
    return service


def group_id_of(request: web.Request) -> str:
    group_id = request.match_info["group"]
    try:
        return msgspec.convert(group_id, GroupId)
    except msgspec.ValidationError:
        raise invalid_request(f"invalid group id {group_id!r}: use 1-249 characters of [a-zA-Z0-9._-]") from None


@routes.get("/v1/groups")
async def list_groups(request: web.Request) -> web.Response:
    answer = await _service(request).list_groups()
    # Kafka's ListGroups: Describe on the cluster lists all, else the groups one may describe
    return render(request, {**answer, "groups": authz.visible(request, answer.get("groups", []),
                                                              lambda g: g["group_id"])})


@routes.get("/v1/groups/{group}/coordinator")
async def find_coordinator(request: web.Request) -> web.Response:
    return render(request, await _service(request).find_coordinator(group_id_of(request)))


def _member_topics(members: list[dict[str, Any]]) -> set[str]:
    """The topics a group description's members subscribe to, own, or are to own."""
    topics = {topic for m in members for topic in m["subscribed_topics"]}
    for key in ("assignment", "pending_revocation", "target_assignment"):
        topics.update(entry["topic"] for m in members for entry in m[key])
    return topics


@routes.get("/v1/groups/{group}")
async def describe_group(request: web.Request) -> web.Response:
    answer = await _service(request).describe_group(group_id_of(request))
    # Kafka's ConsumerGroupDescribe: refused unless the members' topics may be described; the
    # committed offsets of other topics are left out, as OffsetFetch leaves them out
    authz.require_named(request, _member_topics(answer["members"]))
    return render(request, {**answer, "offsets": authz.visible(request, answer["offsets"], lambda o: o["topic"])})


@routes.delete("/v1/groups/{group}")
async def delete_group(request: web.Request) -> web.Response:
    return render(request, await _service(request).delete_group(group_id_of(request)))


@routes.post("/v1/groups/{group}/heartbeat")
async def heartbeat(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, HeartbeatRequest)
    if body.subscribed_topics:
        # Kafka: a member may subscribe only to topics it may Describe (a regex is resolved to those)
        authz.require_named(request, body.subscribed_topics)
    owned = None
    if body.owned_partitions is not None:
        owned = frozenset((entry.topic, p) for entry in body.owned_partitions for p in entry.partitions)
    req = GroupHeartbeat(
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        client_id=body.client_id[:255],
        client_host=authz.client_host(request),
        principal=principal_of(request),
        subscribed_topics=None if body.subscribed_topics is None else tuple(dict.fromkeys(body.subscribed_topics)),
        subscribed_topic_regex=body.subscribed_topic_regex,
        server_assignor=body.server_assignor,
        owned=owned,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
    )
    return render(request, await _service(request).heartbeat(group_id, req))


@routes.post("/v1/groups/{group}/offsets")
async def commit_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, CommitOffsetsRequest)
    entries = [OffsetCommitEntry(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets]
    member_id, member_epoch = body.member_id, body.member_epoch
    authz.require_named(request, {e.topic for e in entries})
    return render(request, await _service(request).commit_offsets(group_id, member_id, member_epoch, entries))


@routes.get("/v1/groups/{group}/offsets")
async def fetch_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    wanted = read_query(request, FetchOffsetsQuery).topics
    topics = None
    if wanted is not None:
        topics = [check_topic_name(t.strip()) for t in wanted.split(",") if t.strip()]
    answer = await _service(request).fetch_offsets(group_id, topics)
    # Kafka's OffsetFetch: the offsets of topics the principal may not describe are left out
    return render(request, {**answer, "offsets": authz.visible(request, answer["offsets"], lambda o: o["topic"])})


@routes.post("/v1/groups/{group}/offsets/reset")
async def reset_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, ResetOffsetsRequest)
    topics = tuple(dict.fromkeys(body.topics))
    partitions = None if body.partitions is None else tuple(sorted(set(body.partitions)))
    value = None if body.strategy in ("earliest", "latest") else body.value
    reset = OffsetReset(topics, partitions, body.strategy, value, body.dry_run)
    authz.require_named(request, topics)
    return render(request, await _service(request).reset_offsets(group_id, reset))


@routes.post("/v1/groups/{group}/offsets/delete")
async def delete_offsets(request: web.Request) -> web.Response:
    """Kafka's OffsetDelete: {"topics": [{"topic", "partitions"?}]}, every partition when omitted."""
    group_id = group_id_of(request)
    body = await read_message(request, DeleteOffsetsRequest)
    topics = [(t.topic, None if t.partitions is None else tuple(sorted(set(t.partitions)))) for t in body.topics]
    authz.require_named(request, {t for t, _ in topics})
    return render(request, await _service(request).delete_offsets(group_id, topics))

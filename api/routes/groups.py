"""Consumer group routes (KIP-848 heartbeat, offset commit/fetch, list, describe, delete, reset)
over the `GroupService` (kraft/server/groups.py, implemented by `kraft.broker.groups.coordinator`).

Requests for a group go to its coordinator (the leader of its `__consumer_offsets` partition);
another broker answers NOT_COORDINATOR naming it (`GET /v1/groups/{group}/coordinator` finds
it). Bodies and answers are the messages of api/messages/groups.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError, invalid_request
from kraft.api.messages.common import GroupId, check_topic_name
from kraft.api.messages.groups import (
    CommitOffsetsRequest, CommitOffsetsResponse, DeleteGroupResponse, DeleteOffsetsRequest, DeleteOffsetsResponse,
    DescribeGroupResponse, FetchOffsetsQuery, FetchOffsetsResponse, FindCoordinatorResponse, HeartbeatRequest,
    HeartbeatResponse, ListGroupsResponse, ResetOffsetsRequest, ResetOffsetsResponse,
)
from kraft.api.security import principal_of
from kraft.api.wire import read_message, read_query, render
from kraft.server.groups import GroupHeartbeat, GroupService, OffsetCommitEntry, OffsetReset

routes = web.RouteTableDef()

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
    answer = dataclasses.replace(answer, groups=authz.visible(request, answer.groups, lambda g: g.group_id))
    return render(request, _wire(answer, ListGroupsResponse))


@routes.get("/v1/groups/{group}/coordinator")
async def find_coordinator(request: web.Request) -> web.Response:
    return render(request, _wire(await _service(request).find_coordinator(group_id_of(request)),
                                 FindCoordinatorResponse))


def _wire(answer: Any, message: type[Any]) -> Any:
    """A typed answer of the group service as its message of api/messages/groups.py."""
    return msgspec.convert(answer, message, from_attributes=True)


@routes.get("/v1/groups/{group}")
async def describe_group(request: web.Request) -> web.Response:
    answer = await _service(request).describe_group(group_id_of(request))
    # Kafka's ConsumerGroupDescribe: refused unless the members' topics may be described; the
    # committed offsets of other topics are left out, as OffsetFetch leaves them out
    authz.require_named(request, set().union(*(m.topics() for m in answer.members)))
    answer = dataclasses.replace(answer, offsets=authz.visible(request, answer.offsets, lambda o: o.topic))
    return render(request, _wire(answer, DescribeGroupResponse))


@routes.delete("/v1/groups/{group}")
async def delete_group(request: web.Request) -> web.Response:
    return render(request, _wire(await _service(request).delete_group(group_id_of(request)), DeleteGroupResponse))


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
    return render(request, _wire(await _service(request).heartbeat(group_id, req), HeartbeatResponse))


@routes.post("/v1/groups/{group}/offsets")
async def commit_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, CommitOffsetsRequest)
    entries = [OffsetCommitEntry(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets]
    member_id, member_epoch = body.member_id, body.member_epoch
    authz.require_named(request, {e.topic for e in entries})
    answer = await _service(request).commit_offsets(group_id, member_id, member_epoch, entries)
    return render(request, _wire(answer, CommitOffsetsResponse))


@routes.get("/v1/groups/{group}/offsets")
async def fetch_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    wanted = read_query(request, FetchOffsetsQuery).topics
    topics = None
    if wanted is not None:
        topics = [check_topic_name(t.strip()) for t in wanted.split(",") if t.strip()]
    answer = await _service(request).fetch_offsets(group_id, topics)
    # Kafka's OffsetFetch: the offsets of topics the principal may not describe are left out
    answer = dataclasses.replace(answer, offsets=authz.visible(request, answer.offsets, lambda o: o.topic))
    return render(request, _wire(answer, FetchOffsetsResponse))


@routes.post("/v1/groups/{group}/offsets/reset")
async def reset_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, ResetOffsetsRequest)
    topics = tuple(dict.fromkeys(body.topics))
    partitions = None if body.partitions is None else tuple(sorted(set(body.partitions)))
    value = None if body.strategy in ("earliest", "latest") else body.value
    reset = OffsetReset(topics, partitions, body.strategy, value, body.dry_run)
    authz.require_named(request, topics)
    return render(request, _wire(await _service(request).reset_offsets(group_id, reset), ResetOffsetsResponse))


@routes.post("/v1/groups/{group}/offsets/delete")
async def delete_offsets(request: web.Request) -> web.Response:
    """Kafka's OffsetDelete: {"topics": [{"topic", "partitions"?}]}, every partition when omitted."""
    group_id = group_id_of(request)
    body = await read_message(request, DeleteOffsetsRequest)
    topics = [(t.topic, None if t.partitions is None else tuple(sorted(set(t.partitions)))) for t in body.topics]
    authz.require_named(request, {t for t, _ in topics})
    return render(request, _wire(await _service(request).delete_offsets(group_id, topics), DeleteOffsetsResponse))

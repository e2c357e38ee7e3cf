"""Consumer group routes (KIP-848 heartbeat, offset commit/fetch, list, describe, delete, reset),
adapters over the group services (kraft/server/group_apis.py).

Requests for a group go to its coordinator (the leader of its `__consumer_offsets` partition);
another broker answers NOT_COORDINATOR naming it (`GET /v1/groups/{group}/coordinator` finds
it). Bodies and answers are the messages of api/messages/groups.py.
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from kraft.api.errors import invalid_request
from kraft.api.messages.common import GroupId, check_topic_name
from kraft.api.messages.groups import (
    CommitOffsetsRequest, CommitOffsetsResponse, DeleteGroupResponse, DeleteOffsetsRequest, DeleteOffsetsResponse,
    DescribeGroupResponse, FetchOffsetsQuery, FetchOffsetsResponse, FindCoordinatorResponse, HeartbeatRequest,
    HeartbeatResponse, ListGroupsResponse, ResetOffsetsRequest, ResetOffsetsResponse,
)
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_message, read_query, render
from kraft.errors import KraftError
from kraft.server.group_apis import GroupApis
from kraft.server.groups import CommitOffsetsResult, GroupHeartbeat, OffsetCommitEntry, OffsetReset
from kraft.server.request_context import MAX_CLIENT_ID_CHARS

routes = web.RouteTableDef()


def _groups(request: web.Request) -> GroupApis:
    return services_of(request).groups


def _wire(answer: Any, message: type[Any]) -> Any:
    """A typed answer of the group services as its message of api/messages/groups.py."""
    return msgspec.convert(answer, message, from_attributes=True)


def group_id_of(request: web.Request) -> str:
    group_id = request.match_info["group"]
    try:
        return msgspec.convert(group_id, GroupId)
    except msgspec.ValidationError:
        raise invalid_request(f"invalid group id {group_id!r}: use 1-249 characters of [a-zA-Z0-9._-]") from None


@routes.get("/v1/groups")
async def list_groups(request: web.Request) -> web.Response:
    return render(request, _wire(await _groups(request).list_groups(context_of(request)), ListGroupsResponse))


@routes.get("/v1/groups/{group}/coordinator")
async def find_coordinator(request: web.Request) -> web.Response:
    answer = await _groups(request).find_coordinator(context_of(request), group_id_of(request))
    return render(request, _wire(answer, FindCoordinatorResponse))


@routes.get("/v1/groups/{group}")
async def describe_group(request: web.Request) -> web.Response:
    answer = await _groups(request).describe_group(context_of(request), group_id_of(request))
    return render(request, _wire(answer, DescribeGroupResponse))


@routes.delete("/v1/groups/{group}")
async def delete_group(request: web.Request) -> web.Response:
    answer = await _groups(request).delete_group(context_of(request), group_id_of(request))
    return render(request, _wire(answer, DeleteGroupResponse))


@routes.post("/v1/groups/{group}/heartbeat")
async def heartbeat(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, HeartbeatRequest)
    owned = None
    if body.owned_partitions is not None:
        owned = frozenset((entry.topic, p) for entry in body.owned_partitions for p in entry.partitions)
    req = GroupHeartbeat(
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        client_id=body.client_id[:MAX_CLIENT_ID_CHARS],
        client_host="",  # the services take the member's host and principal from the request context
        subscribed_topics=None if body.subscribed_topics is None else tuple(dict.fromkeys(body.subscribed_topics)),
        subscribed_topic_regex=body.subscribed_topic_regex,
        server_assignor=body.server_assignor,
        owned=owned,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
    )
    answer = await _groups(request).heartbeat(context_of(request), group_id, req)
    return render(request, _wire(answer, HeartbeatResponse))


@routes.post("/v1/groups/{group}/offsets")
async def commit_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, CommitOffsetsRequest)
    entries = [OffsetCommitEntry(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets]
    answer = await _groups(request).commit_offsets(context_of(request), group_id, body.member_id, body.member_epoch,
                                                   entries)
    return render(request, _wire(some_committed(answer), CommitOffsetsResponse))


def some_committed(answer: CommitOffsetsResult) -> CommitOffsetsResult:
    """The answer when an offset was committed; else one error answers (raised)."""
    refused = [o for o in answer.offsets if o.error_code]
    if refused and len(refused) == len(answer.offsets):
        code = refused[0].error_code or "UNKNOWN_SERVER_ERROR"
        raise KraftError(code, f"no offset committed ({code}) for topics [{', '.join(sorted({o.topic for o in refused}))}]")
    return answer


@routes.get("/v1/groups/{group}/offsets")
async def fetch_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    wanted = read_query(request, FetchOffsetsQuery).topics
    topics = None
    if wanted is not None:
        topics = [check_topic_name(t.strip()) for t in wanted.split(",") if t.strip()]
    answer = await _groups(request).fetch_offsets(context_of(request), group_id, topics)
    return render(request, _wire(answer, FetchOffsetsResponse))


@routes.post("/v1/groups/{group}/offsets/reset")
async def reset_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, ResetOffsetsRequest)
    topics = tuple(dict.fromkeys(body.topics))
    partitions = None if body.partitions is None else tuple(sorted(set(body.partitions)))
    value = None if body.strategy in ("earliest", "latest") else body.value
    reset = OffsetReset(topics, partitions, body.strategy, value, body.dry_run)
    answer = await _groups(request).reset_offsets(context_of(request), group_id, reset)
    return render(request, _wire(answer, ResetOffsetsResponse))


@routes.post("/v1/groups/{group}/offsets/delete")
async def delete_offsets(request: web.Request) -> web.Response:
    """Kafka's OffsetDelete: {"topics": [{"topic", "partitions"?}]}, every partition when omitted."""
    group_id = group_id_of(request)
    body = await read_message(request, DeleteOffsetsRequest)
    topics = [(t.topic, None if t.partitions is None else tuple(sorted(set(t.partitions)))) for t in body.topics]
    answer = await _groups(request).delete_offsets(context_of(request), group_id, topics)
    return render(request, _wire(answer, DeleteOffsetsResponse))

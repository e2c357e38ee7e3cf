"""Consumer group routes (KIP-848 heartbeat, offset commit/fetch, list, describe, delete, reset)
and the `GroupService` interface they call (implemented by `kraft.broker.groups.coordinator`).

Requests for a group go to its coordinator (the leader of its `__consumer_offsets` partition);
another broker answers NOT_COORDINATOR naming it (`GET /v1/groups/{group}/coordinator` finds
it). Answers are the bodies documented in api/openapi.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError, invalid_request
from kraft.api.wire import INT32_MAX, INT64_MAX, Fields, check_topic_name, read_body, render
from kraft.metadata.acl import GROUP

routes = web.RouteTableDef()

GROUP_ID = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
MAX_ITEMS = 10_000  # partitions per commit / owned list: bounds one request
MAX_METADATA = 4096  # Kafka's offset.metadata.max.bytes
STRATEGIES = ("earliest", "latest", "offset", "datetime", "shift")


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
    strategy: str  # one of STRATEGIES
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
    if not GROUP_ID.match(group_id):
        raise invalid_request(f"invalid group id {group_id!r}: use 1-249 characters of [a-zA-Z0-9._-]")
    return group_id


def _topic_partitions(fields: Fields, name: str) -> frozenset[tuple[str, int]] | None:
    """`[{"topic", "partitions": [..]}]` -> set of (topic, partition); None when absent."""
    if not fields.has(name):
        return None
    out: set[tuple[str, int]] = set()
    for i, item in enumerate(fields.get_list(name, MAX_ITEMS)):
        entry = fields.child(item, f"{name}[{i}]")
        topic = check_topic_name(entry.raw("topic"))
        for j, p in enumerate(entry.get_list("partitions", MAX_ITEMS)):
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= INT32_MAX:
                raise invalid_request(f"{entry.where}.partitions[{j}] must be a partition number")
            out.add((topic, p))
    if len(out) > MAX_ITEMS:
        raise invalid_request(f"body.{name} names {len(out)} partitions, at most {MAX_ITEMS}")
    return frozenset(out)


@routes.get("/v1/groups")
async def list_groups(request: web.Request) -> web.Response:
    answer = await _service(request).list_groups()
    if authz.enabled(request) and not authz.allowed(request, "DESCRIBE", "CLUSTER"):
        # Kafka's ListGroups: Describe on the cluster lists all, else the groups one may describe
        answer = {**answer, "groups": authz.visible(request, "DESCRIBE", GROUP, answer.get("groups", []),
                                                    lambda g: g["group_id"])}
    return render(request, answer)


@routes.get("/v1/groups/{group}/coordinator")
async def find_coordinator(request: web.Request) -> web.Response:
    authz.require(request, "DESCRIBE", GROUP, group_id_of(request))
    return render(request, await _service(request).find_coordinator(group_id_of(request)))


@routes.get("/v1/groups/{group}")
async def describe_group(request: web.Request) -> web.Response:
    authz.require(request, "DESCRIBE", GROUP, group_id_of(request))
    return render(request, await _service(request).describe_group(group_id_of(request)))


@routes.delete("/v1/groups/{group}")
async def delete_group(request: web.Request) -> web.Response:
    authz.require(request, "DELETE", GROUP, group_id_of(request))
    return render(request, await _service(request).delete_group(group_id_of(request)))


@routes.post("/v1/groups/{group}/heartbeat")
async def heartbeat(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    authz.require(request, "READ", GROUP, group_id)
    body, _ = await read_body(request)
    f = Fields(body)
    topics = None
    if f.has("subscribed_topics"):
        topics = tuple(dict.fromkeys(
            check_topic_name(t) for t in f.get_list("subscribed_topics", MAX_ITEMS)))
    regex = f.get_str("subscribed_topic_regex", None)
    if regex is not None and len(regex) > 1000:
        raise invalid_request("body.subscribed_topic_regex is longer than 1000 characters")
    req = GroupHeartbeat(
        member_id=f.get_str("member_id", ""),
        member_epoch=f.get_int("member_epoch", minimum=-1, maximum=INT32_MAX),
        client_id=f.get_str("client_id", "")[:255],
        client_host=request.remote or "",
        subscribed_topics=topics,
        subscribed_topic_regex=regex,
        server_assignor=f.get_str("server_assignor", None),
        owned=_topic_partitions(f, "owned_partitions"),
        rebalance_timeout_ms=f.get_int("rebalance_timeout_ms", 300_000, 1, INT32_MAX),
    )
    if len(req.member_id) > 255:
        raise invalid_request("body.member_id is longer than 255 characters")
    return render(request, await _service(request).heartbeat(group_id, req))


@routes.post("/v1/groups/{group}/offsets")
async def commit_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body, _ = await read_body(request)
    f = Fields(body)
    entries = []
    for i, item in enumerate(f.get_list("offsets", MAX_ITEMS)):
        e = f.child(item, f"offsets[{i}]")
        metadata = e.get_str("metadata", "")
        if len(metadata) > MAX_METADATA:
            raise invalid_request(f"{e.where}.metadata is longer than {MAX_METADATA} characters")
        entries.append(OffsetCommitEntry(
            check_topic_name(e.raw("topic")), e.get_int("partition", maximum=INT32_MAX),
            e.get_int("offset", maximum=INT64_MAX), metadata,
        ))
    member_id = f.get_str("member_id", "")
    member_epoch = f.get_int("member_epoch", -1, -1, INT32_MAX)
    authz.require(request, "READ", GROUP, group_id)
    authz.require_topics(request, "READ", {e.topic for e in entries})
    return render(request, await _service(request).commit_offsets(group_id, member_id, member_epoch, entries))


@routes.get("/v1/groups/{group}/offsets")
async def fetch_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    wanted = request.query.get("topics")
    topics = None
    if wanted is not None:
        topics = [check_topic_name(t.strip()) for t in wanted.split(",") if t.strip()]
    authz.require(request, "DESCRIBE", GROUP, group_id)
    return render(request, await _service(request).fetch_offsets(group_id, topics))


@routes.post("/v1/groups/{group}/offsets/reset")
async def reset_offsets(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body, _ = await read_body(request)
    f = Fields(body)
    topics = tuple(dict.fromkeys(check_topic_name(t) for t in f.get_list("topics", 1000)))
    if not topics:
        raise invalid_request("body.topics must name at least one topic")
    partitions = None
    if f.has("partitions"):
        raw = f.get_list("partitions", MAX_ITEMS)
        if any(isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= INT32_MAX for p in raw):
            raise invalid_request("body.partitions must be partition numbers")
        partitions = tuple(sorted(set(raw)))
    strategy = f.get_str("strategy")
    if strategy not in STRATEGIES:
        raise invalid_request(f"body.strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    value = None
    if strategy in ("offset", "datetime"):
        value = f.get_int("value", maximum=INT64_MAX)
    elif strategy == "shift":
        value = f.get_int("value", minimum=-INT64_MAX, maximum=INT64_MAX)
    dry_run = f.raw("dry_run", True)
    if not isinstance(dry_run, bool):
        raise invalid_request("body.dry_run must be a boolean")
    reset = OffsetReset(topics, partitions, strategy, value, dry_run)
    authz.require(request, "READ", GROUP, group_id)
    authz.require_topics(request, "READ", topics)
    return render(request, await _service(request).reset_offsets(group_id, reset))


@routes.post("/v1/groups/{group}/offsets/delete")
async def delete_offsets(request: web.Request) -> web.Response:
    """Kafka's OffsetDelete: {"topics": [{"topic", "partitions"?}]}, every partition when omitted."""
    group_id = group_id_of(request)
    body, _ = await read_body(request)
    f = Fields(body)
    topics: list[tuple[str, tuple[int, ...] | None]] = []
    for i, item in enumerate(f.get_list("topics", 1000)):
        entry = f.child(item, f"topics[{i}]")
        partitions = None
        if entry.has("partitions"):
            raw = entry.get_list("partitions", MAX_ITEMS)
            if any(isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= INT32_MAX for p in raw):
                raise invalid_request(f"{entry.where}.partitions must be partition numbers")
            partitions = tuple(sorted(set(raw)))
        topics.append((check_topic_name(entry.raw("topic")), partitions))
    if not topics:
        raise invalid_request("body.topics must name at least one topic")
    authz.require(request, "DELETE", GROUP, group_id)
    authz.require_topics(request, "READ", {t for t, _ in topics})
    return render(request, await _service(request).delete_offsets(group_id, topics))

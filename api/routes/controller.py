"""`/v1/controller/...`: the controller API brokers and tools use (KRaft's controller RPCs).

Broker registration, heartbeats and unregistration, the metadata log for observers (long poll
from an offset, or "snapshot needed" and the image snapshot in msgpack), quorum status,
AlterPartition, producer-id blocks, partition reassignments (KIP-455), and the topic changes
other nodes forward. Only the active
controller answers; any other node answers NOT_CONTROLLER with `leader: {node_id, host, port}`
when it knows the active controller. Writes take an optional `request_id`: a retry with the same
id after an unknown outcome is applied once. Every write answer carries `metadata_offset`, the
offset it was committed at.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable, Mapping, Protocol

import msgpack
from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError, invalid_request
from kraft.api.routes.acls import quota_entries
from kraft.api.routes.users import scram_alterations
from kraft.api.wire import INT32_MAX, MSGPACK, Fields, check_topic_name, read_body, render

routes = web.RouteTableDef()

MAX_FETCH_RECORDS = 10_000
MAX_FETCH_WAIT_MS = 1_000
MAX_ELECTION_PARTITIONS = 100_000
MAX_REASSIGNMENTS = 100_000


class ControllerApi(Protocol):
    def local_status(self) -> dict[str, Any]: ...

    async def describe_quorum(self) -> dict[str, Any]: ...

    async def fetch_metadata(self, broker_id: int | None, from_offset: int, max_records: int,
                             max_wait_ms: int) -> dict[str, Any]: ...

    def snapshot(self) -> Callable[[], dict[str, Any]]: ...

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: list[dict[str, Any]],
                              rack: str | None, cluster_id: str | None, request_id: str | None) -> dict[str, Any]: ...

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, current_metadata_offset: int,
                               want_fence: bool, want_shutdown: bool) -> dict[str, Any]: ...

    async def unregister_broker(self, broker_id: int, request_id: str | None) -> dict[str, Any]: ...

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int,
                                    request_id: str | None) -> dict[str, Any]: ...

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: list[int],
                              request_id: str | None) -> dict[str, Any]: ...

    async def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                           configs: Mapping[str, Any], validate_only: bool,
                           request_id: str | None) -> dict[str, Any]: ...

    async def delete_topic(self, name: str, request_id: str | None) -> dict[str, Any]: ...

    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                request_id: str | None) -> dict[str, Any]: ...

    async def alter_configs(self, resource_type: str, resource_name: str, configs: Mapping[str, Any],
                            validate_only: bool, request_id: str | None) -> dict[str, Any]: ...

    async def elect_leaders(self, partitions: Iterable[tuple[str, int]] | None,
                            request_id: str | None) -> dict[str, Any]: ...

    async def alter_user_scram_credentials(self, upsertions: list[Any], deletions: list[Any],
                                           request_id: str | None) -> dict[str, Any]: ...

    async def alter_partition_reassignments(self, reassignments: list[dict[str, Any]],
                                            request_id: str | None) -> dict[str, Any]: ...

    async def list_partition_reassignments(self) -> dict[str, Any]: ...

    async def create_acls(self, acls: list[Any], request_id: str | None) -> dict[str, Any]: ...

    async def delete_acls(self, filters: list[Any], request_id: str | None) -> dict[str, Any]: ...

    async def alter_client_quotas(self, entries: list[Any], validate_only: bool,
                                  request_id: str | None) -> dict[str, Any]: ...


CONTROLLER = web.AppKey("controller_api", ControllerApi)


def _api(request: web.Request) -> ControllerApi:
    api = request.app.get(CONTROLLER)
    if api is None:
        raise KraftError("NOT_CONTROLLER", "this node serves no controller API")
    return api


async def _body(request: web.Request) -> Fields:
    body, _ = await read_body(request)
    return Fields(body)


def _request_id(fields: Fields) -> str | None:
    request_id = fields.get_str("request_id", None, nullable=True)
    if request_id is not None and not 0 < len(request_id) <= 256:
        raise invalid_request("body.request_id must be 1-256 characters")
    return request_id


def _bool(fields: Fields, name: str) -> bool:
    value = fields.raw(name, False)
    if not isinstance(value, bool):
        raise invalid_request(f"body.{name} must be a boolean")
    return value


def _int_list(fields: Fields, name: str) -> list[int]:
    values = fields.get_list(name, 1000)
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT32_MAX for v in values):
        raise invalid_request(f"{fields.where}.{name} must be an array of broker ids")
    return values


def _endpoints(fields: Fields) -> list[dict[str, Any]]:
    endpoints = []
    for i, raw in enumerate(fields.get_list("endpoints", 16)):
        e = fields.child(raw, f"endpoints[{i}]")
        endpoints.append({"name": e.get_str("name", "HTTP"), "host": e.get_str("host"),
                          "port": e.get_int("port", minimum=1, maximum=65535)})
    return endpoints


# -- status and the metadata log ----------------------------------------------------------------


@routes.get("/v1/controller/quorum")
async def describe_quorum(request: web.Request) -> web.Response:
    authz.require(request, "DESCRIBE", "CLUSTER")
    return render(request, await _api(request).describe_quorum())


@routes.get("/v1/controller/quorum/local")
async def local_status(request: web.Request) -> web.Response:
    return render(request, _api(request).local_status())


@routes.get("/v1/controller/metadata")
async def fetch_metadata(request: web.Request) -> web.Response:
    query = Fields(request.query, "query")
    broker_id = query.get_int("broker_id", None, 0, INT32_MAX)
    from_offset = query.get_int("from_offset", 0, 0)
    max_records = query.get_int("max_records", 1000, 1, MAX_FETCH_RECORDS)
    max_wait_ms = query.get_int("max_wait_ms", 0, 0, MAX_FETCH_WAIT_MS)
    return render(request, await _api(request).fetch_metadata(broker_id, from_offset, max_records, max_wait_ms))


@routes.get("/v1/controller/snapshot")
async def snapshot(request: web.Request) -> web.Response:
    build = _api(request).snapshot()
    body = await asyncio.to_thread(lambda: msgpack.packb(build(), use_bin_type=True))
    return web.Response(body=body, content_type=MSGPACK)


# -- brokers --------------------------------------------------------------------------------------


@routes.post("/v1/controller/brokers/register")
async def register_broker(request: web.Request) -> web.Response:
    f = await _body(request)
    answer = await _api(request).register_broker(
        f.get_int("broker_id", maximum=INT32_MAX), f.get_str("incarnation_id"), _endpoints(f),
        f.get_str("rack", None, nullable=True), f.get_str("cluster_id", None, nullable=True), _request_id(f))
    return render(request, answer)


@routes.post("/v1/controller/brokers/heartbeat")
async def broker_heartbeat(request: web.Request) -> web.Response:
    f = await _body(request)
    answer = await _api(request).broker_heartbeat(
        f.get_int("broker_id", maximum=INT32_MAX), f.get_int("broker_epoch", minimum=-1),
        f.get_int("current_metadata_offset", minimum=-1), _bool(f, "want_fence"), _bool(f, "want_shutdown"))
    return render(request, answer)


@routes.post("/v1/controller/brokers/unregister")
async def unregister_broker(request: web.Request) -> web.Response:
    f = await _body(request)
    return render(request, await _api(request).unregister_broker(f.get_int("broker_id", maximum=INT32_MAX),
                                                                 _request_id(f)))


@routes.post("/v1/controller/producer-ids")
async def allocate_producer_ids(request: web.Request) -> web.Response:
    f = await _body(request)
    return render(request, await _api(request).allocate_producer_ids(
        f.get_int("broker_id", maximum=INT32_MAX), f.get_int("broker_epoch", minimum=-1), _request_id(f)))


@routes.post("/v1/controller/alter-partition")
async def alter_partition(request: web.Request) -> web.Response:
    f = await _body(request)
    answer = await _api(request).alter_partition(
        f.get_int("broker_id", maximum=INT32_MAX), f.get_int("broker_epoch", minimum=-1),
        check_topic_name(f.raw("topic")), f.get_int("partition", maximum=INT32_MAX),
        f.get_int("leader_epoch", maximum=INT32_MAX), f.get_int("partition_epoch", maximum=INT32_MAX),
        _int_list(f, "new_isr"), _request_id(f))
    return render(request, answer)


# -- topics (forwarded by other nodes) ------------------------------------------------------------


@routes.post("/v1/controller/topics")
async def create_topic(request: web.Request) -> web.Response:
    f = await _body(request)
    configs = f.get_object("configs", None) or {}
    answer = await _api(request).create_topic(
        check_topic_name(f.raw("name")),
        f.get_int("partitions", None, 1, 100_000, "INVALID_PARTITIONS"),
        f.get_int("replication_factor", None, 1, 32767, "INVALID_REPLICATION_FACTOR"),
        dict(configs), _bool(f, "validate_only"), _request_id(f))
    return render(request, answer)


@routes.post("/v1/controller/topics/delete")
async def delete_topic(request: web.Request) -> web.Response:
    f = await _body(request)
    return render(request, await _api(request).delete_topic(check_topic_name(f.raw("name")), _request_id(f)))


@routes.post("/v1/controller/topics/partitions")
async def create_partitions(request: web.Request) -> web.Response:
    f = await _body(request)
    answer = await _api(request).create_partitions(
        check_topic_name(f.raw("name")), f.get_int("count", minimum=1, maximum=100_000,
                                                   range_error="INVALID_PARTITIONS"),
        _bool(f, "validate_only"), _request_id(f))
    return render(request, answer)


@routes.post("/v1/controller/configs")
async def alter_configs(request: web.Request) -> web.Response:
    f = await _body(request)
    resource_type = f.get_str("resource_type", "topic")
    if resource_type != "topic":
        raise invalid_request(f"unsupported config resource type {resource_type!r}")
    answer = await _api(request).alter_configs(
        resource_type, check_topic_name(f.raw("resource_name")), dict(f.get_object("configs")),
        _bool(f, "validate_only"), _request_id(f))
    return render(request, answer)


@routes.post("/v1/controller/users/scram-credentials")
async def alter_user_scram_credentials(request: web.Request) -> web.Response:
    """Forwarded by nodes from `POST /v1/users/scram-credentials` (kafka-configs --entity-type users)."""
    f = await _body(request)
    upsertions, deletions = scram_alterations(f)
    return render(request, await _api(request).alter_user_scram_credentials(upsertions, deletions, _request_id(f)))


@routes.post("/v1/controller/elect-leaders")
async def elect_leaders(request: web.Request) -> web.Response:
    """Preferred leader election (the only type: unclean elections follow the topic config)."""
    authz.require(request, "ALTER", "CLUSTER")
    f = await _body(request)
    election_type = f.get_str("election_type", "preferred")
    if election_type != "preferred":
        raise invalid_request(f"election_type {election_type!r}: only 'preferred' is supported")
    raw = f.raw("partitions", None, nullable=True)
    partitions = None
    if raw is not None:
        entries = f.get_list("partitions", MAX_ELECTION_PARTITIONS)
        partitions = []
        for i, entry in enumerate(entries):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], int)
                    and not isinstance(entry[1], bool) and 0 <= entry[1] <= INT32_MAX):
                raise invalid_request(f"body.partitions[{i}] must be [topic, partition]")
            partitions.append((check_topic_name(entry[0]), entry[1]))
    return render(request, await _api(request).elect_leaders(partitions, _request_id(f)))


# -- ACLs and client quotas, forwarded by nodes from /v1/acls and /v1/client-quotas --------------

MAX_ACL_ENTRIES = 1000


@routes.post("/v1/controller/acls")
async def create_acls(request: web.Request) -> web.Response:
    f = await _body(request)
    return render(request, await _api(request).create_acls(f.get_list("acls", MAX_ACL_ENTRIES), _request_id(f)))


@routes.post("/v1/controller/acls/delete")
async def delete_acls(request: web.Request) -> web.Response:
    f = await _body(request)
    return render(request, await _api(request).delete_acls(f.get_list("filters", MAX_ACL_ENTRIES), _request_id(f)))


@routes.post("/v1/controller/client-quotas")
async def alter_client_quotas(request: web.Request) -> web.Response:
    f = await _body(request)
    return render(request, await _api(request).alter_client_quotas(
        quota_entries(f), _bool(f, "validate_only"), _request_id(f)))


# -- reassignments (kafka-reassign-partitions) ----------------------------------------------------


@routes.get("/v1/controller/reassignments")
async def list_partition_reassignments(request: web.Request) -> web.Response:
    authz.require(request, "DESCRIBE", "CLUSTER")
    return render(request, await _api(request).list_partition_reassignments())


@routes.post("/v1/controller/reassignments")
async def alter_partition_reassignments(request: web.Request) -> web.Response:
    """Start (`replicas`: the target) or cancel (`replicas`: null) reassignments, all or none."""
    authz.require(request, "ALTER", "CLUSTER")
    f = await _body(request)
    reassignments = []
    for i, raw in enumerate(f.get_list("partitions", MAX_REASSIGNMENTS)):
        entry = f.child(raw, f"partitions[{i}]")
        replicas = entry.raw("replicas", nullable=True)
        if replicas is not None:
            replicas = _int_list(entry, "replicas")
        reassignments.append({"topic": check_topic_name(entry.raw("topic")),
                              "partition": entry.get_int("partition", maximum=INT32_MAX), "replicas": replicas})
    return render(request, await _api(request).alter_partition_reassignments(reassignments, _request_id(f)))

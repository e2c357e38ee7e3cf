"""ACLs and client quotas, as kafka-acls and kafka-configs --entity-type users|clients manage them
(Kafka's DescribeAcls/CreateAcls/DeleteAcls and DescribeClientQuotas/AlterClientQuotas).

`GET /v1/acls` with Kafka's filter fields as query parameters (resource_type, resource_name,
pattern_type ANY|MATCH|LITERAL|PREFIXED, principal, host, operation, permission_type; absent =
any) lists bindings; `POST /v1/acls` `{"acls": [binding]}` creates them; `POST /v1/acls/delete`
`{"filters": [filter]}` removes what each filter matches and answers it. Describing needs Describe
on the cluster, changing Alter; without an authorizer they answer SECURITY_DISABLED, as Kafka does.
`GET /v1/client-quotas` lists the quotas of every entity; `POST /v1/client-quotas`
`{"entries": [{"entity": {"user", "client_id"}, "ops": [{"key", "value"} | {"key", "remove": true}]}]}`
changes them (DescribeConfigs / AlterConfigs on the cluster).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError, invalid_request
from kraft.api.wire import Fields, read_body, render
from kraft.metadata.acl import CLUSTER, StandardAcl, acl_from_dict, filter_from_dict

MAX_ENTRIES = 1000
FILTER_FIELDS = StandardAcl.FIELDS


class AclService(Protocol):
    def describe_acls(self, flt: dict[str, Any]) -> list[dict[str, str]]: ...

    async def create_acls(self, acls: list[dict[str, Any]]) -> dict[str, Any]: ...

    async def delete_acls(self, filters: list[dict[str, Any]]) -> dict[str, Any]: ...

    def describe_client_quotas(self) -> list[dict[str, Any]]: ...

    async def alter_client_quotas(self, entries: list[dict[str, Any]], validate_only: bool) -> dict[str, Any]: ...


ACLS = web.AppKey("acl_service", AclService)

routes = web.RouteTableDef()


def _service(request: web.Request) -> AclService:
    if ACLS not in request.app:
        raise KraftError("UNSUPPORTED_VERSION", "this node does not manage ACLs")
    return request.app[ACLS]


def _acl_service(request: web.Request, operation: str) -> AclService:
    if not authz.enabled(request):
        raise KraftError("SECURITY_DISABLED", "No Authorizer is configured on the broker "
                                              "(authorizer.class.name)")
    authz.require(request, operation, CLUSTER)
    return _service(request)


def _quota_op(op: Fields) -> dict[str, Any]:
    key = op.get_str("key")
    remove = op.raw("remove", False)
    if not isinstance(remove, bool):
        raise invalid_request(f"{op.where}.remove must be a boolean")
    if remove:
        return {"key": key, "remove": True}
    value = op.raw("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid_request(f"{op.where}.value must be a number")
    try:
        as_float = float(value)  # quotas are doubles (Kafka's too); an int beyond int64 would not encode
    except OverflowError:
        as_float = math.inf
    if not math.isfinite(as_float):
        raise invalid_request(f"{op.where}.value must be a finite number")
    return {"key": key, "value": as_float}


def quota_entries(f: Fields) -> list[dict[str, Any]]:
    """The `entries` of an AlterClientQuotas body, type-checked (INVALID_REQUEST naming the field)
    and rebuilt from the known fields only: {entity: {user, client_id}, ops: [{key, value} |
    {key, remove: true}]}. What the values mean (a known key, a positive rate) the controller
    checks. Shared by this route and the controller's."""
    entries = []
    for i, raw in enumerate(f.get_list("entries", MAX_ENTRIES)):
        entry = f.child(raw, f"entries[{i}]")
        entity = entry.child(entry.get_object("entity"), "entity")
        ops = [_quota_op(entry.child(op, f"ops[{j}]")) for j, op in enumerate(entry.get_list("ops", MAX_ENTRIES))]
        entries.append({"entity": {"user": entity.get_str("user", None, nullable=True),
                                   "client_id": entity.get_str("client_id", None, nullable=True)},
                        "ops": ops})
    return entries


@routes.get("/v1/acls")
async def describe_acls(request: web.Request) -> web.Response:
    service = _acl_service(request, "DESCRIBE")
    q = Fields(request.query, "query")
    flt = {name: q.get_str(name, None) for name in FILTER_FIELDS if name in request.query}
    return render(request, {"acls": service.describe_acls(flt)})


@routes.post("/v1/acls")
async def create_acls(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    f = Fields(body)
    service = _acl_service(request, "ALTER")
    # parsed here, so only strings of the known fields travel to the controller
    acls = [acl_from_dict(f.child(raw, f"acls[{i}]").obj).to_dict()
            for i, raw in enumerate(f.get_list("acls", MAX_ENTRIES))]
    return render(request, await service.create_acls(acls), status=201)


@routes.post("/v1/acls/delete")
async def delete_acls(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    f = Fields(body)
    service = _acl_service(request, "ALTER")
    filters = []
    for i, raw in enumerate(f.get_list("filters", MAX_ENTRIES)):
        flt = filter_from_dict(f.child(raw, f"filters[{i}]").obj)
        filters.append({name: getattr(flt, name) for name in FILTER_FIELDS if getattr(flt, name) is not None})
    return render(request, await service.delete_acls(filters))


@routes.get("/v1/client-quotas")
async def describe_client_quotas(request: web.Request) -> web.Response:
    authz.require(request, "DESCRIBE_CONFIGS", CLUSTER)
    return render(request, {"entries": _service(request).describe_client_quotas()})


@routes.post("/v1/client-quotas")
async def alter_client_quotas(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    f = Fields(body)
    validate_only = f.raw("validate_only", False)
    if not isinstance(validate_only, bool):
        raise KraftError("INVALID_REQUEST", "body.validate_only must be a boolean")
    entries = quota_entries(f)
    authz.require(request, "ALTER_CONFIGS", CLUSTER)
    return render(request, await _service(request).alter_client_quotas(entries, validate_only))

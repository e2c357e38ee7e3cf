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

from typing import Any, Protocol

from aiohttp import web

from api import authz
from api.errors import KraftError
from api.wire import Fields, read_body, render
from metadata.acl import CLUSTER, StandardAcl

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


def _entries(f: Fields, name: str) -> list[dict[str, Any]]:
    return [dict(f.child(raw, f"{name}[{i}]").obj) for i, raw in enumerate(f.get_list(name, MAX_ENTRIES))]


@routes.get("/v1/acls")
async def describe_acls(request: web.Request) -> web.Response:
    service = _acl_service(request, "DESCRIBE")
    q = Fields(request.query, "query")
    flt = {name: q.get_str(name, None) for name in FILTER_FIELDS if name in request.query}
    return render(request, {"acls": service.describe_acls(flt)})


@routes.post("/v1/acls")
async def create_acls(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    acls = _entries(Fields(body), "acls")
    return render(request, await _acl_service(request, "ALTER").create_acls(acls), status=201)


@routes.post("/v1/acls/delete")
async def delete_acls(request: web.Request) -> web.Response:
    body, _ = await read_body(request)
    filters = _entries(Fields(body), "filters")
    return render(request, await _acl_service(request, "ALTER").delete_acls(filters))


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
    entries = _entries(f, "entries")
    authz.require(request, "ALTER_CONFIGS", CLUSTER)
    return render(request, await _service(request).alter_client_quotas(entries, validate_only))

"""ACLs and client quotas, as kafka-acls and kafka-configs --entity-type users|clients manage them
(Kafka's DescribeAcls/CreateAcls/DeleteAcls and DescribeClientQuotas/AlterClientQuotas).

`GET /v1/acls` with Kafka's filter fields as query parameters (resource_type, resource_name,
pattern_type ANY|MATCH|LITERAL|PREFIXED, principal, host, operation, permission_type; absent =
any) lists bindings; `POST /v1/acls` `{"acls": [binding]}` creates them; `POST /v1/acls/delete`
`{"filters": [filter]}` removes what each filter matches and answers it. Describing needs Describe
on the cluster, changing Alter (api/access.py); without an authorizer they answer
SECURITY_DISABLED, as Kafka does.
`GET /v1/client-quotas` lists the quotas of every entity; `POST /v1/client-quotas`
`{"entries": [{"entity": {"user", "client_id"}, "ops": [{"key", "value"} | {"key", "remove": true}]}]}`
changes them (DescribeConfigs / AlterConfigs on the cluster).
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec
from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError
from kraft.api.messages.security import (
    AclFilter, AlterClientQuotasRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsResponse,
    DescribeClientQuotasResponse, QuotaEntry,
)
from kraft.api.wire import read_message, read_query, render
from kraft.metadata.acl import StandardAcl, acl_from_dict, filter_from_dict

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


def _acl_service(request: web.Request) -> AclService:
    if not authz.enabled(request):
        raise KraftError("SECURITY_DISABLED", "No Authorizer is configured on the broker "
                                              "(authorizer.class.name)")
    return _service(request)


def quota_entries(entries: list[QuotaEntry]) -> list[dict[str, Any]]:
    """AlterClientQuotas entries as the controller takes them: {entity: {user, client_id}, ops:
    [{key, value} | {key, remove: true}]}. Shared by this route and the controller's."""
    return msgspec.to_builtins(entries)


@routes.get("/v1/acls")
async def describe_acls(request: web.Request) -> web.Response:
    service = _acl_service(request)
    flt = msgspec.to_builtins(read_query(request, AclFilter))
    return render(request, DescribeAclsResponse(acls=service.describe_acls(flt)))


@routes.post("/v1/acls")
async def create_acls(request: web.Request) -> web.Response:
    body = await read_message(request, CreateAclsRequest)
    service = _acl_service(request)
    # parsed here, so the controller gets Kafka's names (READ for Read)
    acls = [acl_from_dict(binding).to_dict() for binding in msgspec.to_builtins(body.acls)]
    return render(request, await service.create_acls(acls), status=201)


@routes.post("/v1/acls/delete")
async def delete_acls(request: web.Request) -> web.Response:
    body = await read_message(request, DeleteAclsRequest)
    service = _acl_service(request)
    filters = []
    for raw in msgspec.to_builtins(body.filters):
        flt = filter_from_dict(raw)
        filters.append({name: getattr(flt, name) for name in FILTER_FIELDS if getattr(flt, name) is not None})
    return render(request, await service.delete_acls(filters))


@routes.get("/v1/client-quotas")
async def describe_client_quotas(request: web.Request) -> web.Response:
    return render(request, DescribeClientQuotasResponse(entries=_service(request).describe_client_quotas()))


@routes.post("/v1/client-quotas")
async def alter_client_quotas(request: web.Request) -> web.Response:
    body = await read_message(request, AlterClientQuotasRequest)
    return render(request, await _service(request).alter_client_quotas(quota_entries(body.entries),
                                                                      body.validate_only))

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

from typing import Any

import msgspec
from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError
from kraft.api.messages.security import (
    AclFilter, AlterClientQuotasRequest, AlterClientQuotasResponse, CreateAclsRequest, DeleteAclsRequest,
    DescribeAclsResponse, DescribeClientQuotasResponse, QuotaEntry,
)
from kraft.api.wire import read_message, read_query, render
from kraft.metadata.acl import StandardAcl, acl_from_dict, filter_from_dict
from kraft.server.security_admin import AclService

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
    flt = filter_from_dict(msgspec.to_builtins(read_query(request, AclFilter)))
    return render(request, DescribeAclsResponse(acls=_bindings(service.describe_acls(flt))))


def _bindings(acls: list[StandardAcl]) -> list[Any]:
    """ACL bindings as the wire has them: every field, `host` "*" too."""
    return [acl.to_dict() for acl in acls]


@routes.post("/v1/acls")
async def create_acls(request: web.Request) -> web.Response:
    body = await read_message(request, CreateAclsRequest)
    service = _acl_service(request)
    # parsed here, so the controller gets Kafka's names (READ for Read)
    acls = [acl_from_dict(binding) for binding in msgspec.to_builtins(body.acls)]
    return render(request, {"created": _bindings(await service.create_acls(acls))}, status=201)


@routes.post("/v1/acls/delete")
async def delete_acls(request: web.Request) -> web.Response:
    body = await read_message(request, DeleteAclsRequest)
    service = _acl_service(request)
    filters = [filter_from_dict(raw) for raw in msgspec.to_builtins(body.filters)]
    return render(request, {"filter_results": [{"matching_acls": _bindings(matched)}
                                               for matched in await service.delete_acls(filters)]})


@routes.get("/v1/client-quotas")
async def describe_client_quotas(request: web.Request) -> web.Response:
    return render(request, msgspec.convert({"entries": _service(request).describe_client_quotas()},
                                           DescribeClientQuotasResponse, from_attributes=True))


@routes.post("/v1/client-quotas")
async def alter_client_quotas(request: web.Request) -> web.Response:
    body = await read_message(request, AlterClientQuotasRequest)
    changed = await _service(request).alter_client_quotas(quota_entries(body.entries), body.validate_only)
    return render(request, AlterClientQuotasResponse(entries=changed))

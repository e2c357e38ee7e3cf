"""ACLs and client quotas, as kafka-acls and kafka-configs --entity-type users|clients manage them
(Kafka's DescribeAcls/CreateAcls/DeleteAcls and DescribeClientQuotas/AlterClientQuotas).

`GET /v1/acls` with Kafka's filter fields as query parameters (resource_type, resource_name,
pattern_type ANY|MATCH|LITERAL|PREFIXED, principal, host, operation, permission_type; absent =
any) lists bindings; `POST /v1/acls` `{"acls": [binding]}` creates them; `POST /v1/acls/delete`
`{"filters": [filter]}` removes what each filter matches and answers it. Describing needs Describe
on the cluster, changing Alter (kraft/server/access.py); without an authorizer they answer
SECURITY_DISABLED, as Kafka does.
`GET /v1/client-quotas` lists the quotas of every entity; `POST /v1/client-quotas`
`{"entries": [{"entity": {"user", "client_id"}, "ops": [{"key", "value"} | {"key", "remove": true}]}]}`
changes them (DescribeConfigs / AlterConfigs on the cluster).
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from kraft.api.messages.security import (
    AclFilter, AlterClientQuotasRequest, AlterClientQuotasResponse, CreateAclsRequest, DeleteAclsRequest,
    DescribeAclsResponse, DescribeClientQuotasResponse, QuotaEntry,
)
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_message, read_query, render
from kraft.metadata.acl import StandardAcl, acl_from_dict, filter_from_dict

routes = web.RouteTableDef()


def quota_entries(entries: list[QuotaEntry]) -> list[dict[str, Any]]:
    """AlterClientQuotas entries as the controller takes them: {entity: {user, client_id}, ops:
    [{key, value} | {key, remove: true}]}. Shared by this route and the controller's."""
    return msgspec.to_builtins(entries)


def _bindings(acls: list[StandardAcl]) -> list[Any]:
    """ACL bindings as the wire has them: every field, `host` "*" too."""
    return [acl.to_dict() for acl in acls]


@routes.get("/v1/acls")
async def describe_acls(request: web.Request) -> web.Response:
    flt = filter_from_dict(msgspec.to_builtins(read_query(request, AclFilter)))
    return render(request, DescribeAclsResponse(
        acls=_bindings(services_of(request).security.describe_acls(context_of(request), flt))))


@routes.post("/v1/acls")
async def create_acls(request: web.Request) -> web.Response:
    body = await read_message(request, CreateAclsRequest)
    # parsed here, so the controller gets Kafka's names (READ for Read)
    acls = [acl_from_dict(binding) for binding in msgspec.to_builtins(body.acls)]
    created = await services_of(request).security.create_acls(context_of(request), acls)
    return render(request, {"created": _bindings(created)}, status=201)


@routes.post("/v1/acls/delete")
async def delete_acls(request: web.Request) -> web.Response:
    body = await read_message(request, DeleteAclsRequest)
    filters = [filter_from_dict(raw) for raw in msgspec.to_builtins(body.filters)]
    deleted = await services_of(request).security.delete_acls(context_of(request), filters)
    return render(request, {"filter_results": [{"matching_acls": _bindings(matched)} for matched in deleted]})


@routes.get("/v1/client-quotas")
async def describe_client_quotas(request: web.Request) -> web.Response:
    entries = services_of(request).security.describe_client_quotas(context_of(request))
    return render(request, msgspec.convert({"entries": entries}, DescribeClientQuotasResponse, from_attributes=True))


@routes.post("/v1/client-quotas")
async def alter_client_quotas(request: web.Request) -> web.Response:
    body = await read_message(request, AlterClientQuotasRequest)
    changed = await services_of(request).security.alter_client_quotas(context_of(request), quota_entries(body.entries),
                                                                     body.validate_only)
    return render(request, AlterClientQuotasResponse(entries=changed))

"""DescribeAcls, CreateAcls and DeleteAcls over the ACL service (kraft/server/security_apis.py):
the same bindings `kraft acls` and `/v1/acls` manage. Kafka's wire enums (AclOperation,
AclPermissionType, ResourceType, PatternType bytes) map to kraft's names; a binding or filter the
service cannot take (an UNKNOWN enum, a resource type kraft keeps no ACLs for: DELEGATION_TOKEN,
USER) is INVALID_REQUEST for that entry alone. Without an authorizer they answer SECURITY_DISABLED,
as Kafka does; a principal without Describe / Alter on the cluster gets
CLUSTER_AUTHORIZATION_FAILED (per creation and per filter for CreateAcls / DeleteAcls, which have
no top-level error).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping

from kraft.errors import KraftError, from_exception
from kraft.kafka.entities import error_fields
from kraft.kafka.handling import KafkaApi
from kraft.metadata.acl import ANY, MATCH, AclBindingFilter, StandardAcl
from kraft.metadata.errors import MetadataError
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31

# Kafka's enums: ResourceType, PatternType, AclOperation, AclPermissionType (UNKNOWN 0, ANY 1)
RESOURCE_TYPES = {1: ANY, 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID"}
PATTERN_TYPES = {1: ANY, 2: MATCH, 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {1: ANY, 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER", 8: "DESCRIBE",
              9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE"}
PERMISSION_TYPES = {1: ANY, 2: "DENY", 3: "ALLOW"}
_CODES = {table_name: {name: code for code, name in table.items()} for table_name, table in (
    ("resource_type", RESOURCE_TYPES), ("pattern_type", PATTERN_TYPES), ("operation", OPERATIONS),
    ("permission_type", PERMISSION_TYPES))}


def _name(table: Mapping[int, str], code: int, what: str, *, filter_only: bool = False) -> str:
    """kraft's name of a wire enum value; INVALID_REQUEST for one the service cannot take (a
    binding's ANY / MATCH among them)."""
    name = table.get(code)
    if name is None or (not filter_only and name in (ANY, MATCH)):
        raise KraftError("INVALID_REQUEST", f"unsupported {what} {code}")
    return name


def acl_filter(resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
               host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
    flt = AclBindingFilter(
        _name(RESOURCE_TYPES, resource_type, "resource type", filter_only=True), resource_name,
        _name(PATTERN_TYPES, pattern_type, "pattern type", filter_only=True), principal, host,
        _name(OPERATIONS, operation, "operation", filter_only=True),
        _name(PERMISSION_TYPES, permission_type, "permission type", filter_only=True))
    try:
        flt.validate()
    except MetadataError as e:
        raise from_exception(e) from None
    return flt


def binding(creation: Any) -> StandardAcl:
    acl = StandardAcl(
        _name(RESOURCE_TYPES, creation.resource_type, "resource type"), creation.resource_name,
        _name(PATTERN_TYPES, creation.resource_pattern_type, "pattern type"), creation.principal, creation.host,
        _name(OPERATIONS, creation.operation, "operation"),
        _name(PERMISSION_TYPES, creation.permission_type, "permission type"))
    try:
        acl.validate()
    except MetadataError as e:
        raise from_exception(e) from None
    return acl


def _entry(acl: StandardAcl) -> dict[str, Any]:
    return {"principal": acl.principal, "host": acl.host, "operation": _CODES["operation"][acl.operation],
            "permission_type": _CODES["permission_type"][acl.permission_type]}


def _resource(acl: StandardAcl) -> dict[str, Any]:
    return {"resource_type": _CODES["resource_type"][acl.resource_type], "resource_name": acl.resource_name,
            "pattern_type": _CODES["pattern_type"][acl.pattern_type]}


async def describe_acls(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    flt = acl_filter(request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
                     request.principal_filter, request.host_filter, request.operation, request.permission_type)
    by_resource: dict[tuple[str, str, str], list[StandardAcl]] = defaultdict(list)
    for acl in services.security.describe_acls(ctx, flt):
        by_resource[(acl.resource_type, acl.resource_name, acl.pattern_type)].append(acl)
    return {**error_fields(None), "resources": [
        {**_resource(acls[0]), "acls": [_entry(acl) for acl in acls]} for _, acls in sorted(by_resource.items())]}


async def create_acls(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    """Each creation answered on its own: the invalid ones INVALID_REQUEST, the others created
    together (or all given the service's error)."""
    results: list[KraftError | None] = []
    valid: list[StandardAcl] = []
    for creation in request.creations:
        try:
            valid.append(binding(creation))
            results.append(None)
        except KraftError as e:
            results.append(e)
    if valid:
        try:
            await services.security.create_acls(ctx, valid)
        except KraftError as e:
            results = [e if r is None else r for r in results]
    return {"results": [error_fields(r) for r in results]}


async def delete_acls(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    """Each filter answered with the bindings it removed, or its own error."""
    results: list[dict[str, Any]] = []
    filters: list[AclBindingFilter] = []
    for f in request.filters:
        try:
            filters.append(acl_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                      f.principal_filter, f.host_filter, f.operation, f.permission_type))
            results.append({})
        except KraftError as e:
            results.append({**error_fields(e), "matching_acls": []})
    try:
        deleted = iter(await services.security.delete_acls(ctx, filters) if filters else [])
    except KraftError as e:
        return {"filter_results": [r or {**error_fields(e), "matching_acls": []} for r in results]}
    return {"filter_results": [r or {**error_fields(None), "matching_acls": [
        {**error_fields(None), **_resource(acl), **_entry(acl)} for acl in next(deleted)]} for r in results]}


APIS = (
    KafkaApi(DESCRIBE_ACLS, 1, 3, describe_acls),
    KafkaApi(CREATE_ACLS, 1, 3, create_acls),
    KafkaApi(DELETE_ACLS, 1, 3, delete_acls),
)

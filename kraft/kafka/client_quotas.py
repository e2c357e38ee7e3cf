"""DescribeClientQuotas and AlterClientQuotas over the quota service (kraft/server/security_apis.py):
the same quotas `kraft quotas` and `/v1/client-quotas` manage, and the ones the node throttles by.

Entities have Kafka's entity types `user` and `client-id` (a null name is the default entity); an
`ip` entity (connection-rate quotas) is not kept, so a filter or an alteration naming one is
INVALID_REQUEST. Alterations are validated and applied together through the controller (all or
none, as kraft's AlterClientQuotas is): every entry gets the outcome.
"""

from __future__ import annotations

from typing import Any, Mapping

from kraft.errors import KraftError
from kraft.kafka.entities import error_fields
from kraft.kafka.handling import KafkaApi
from kraft.server.request_context import RequestContext
from kraft.server.security_admin import CLIENT_ID, QUOTA_DEFAULT, USER, QuotaComponent, QuotaFilter
from kraft.server.services import BrokerServices

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49

MATCH_TYPES = {0: "exact", 1: "default", 2: "any"}  # Kafka's ClientQuotaFilterComponent match types
_ENTITY_FIELDS = {USER: "user", CLIENT_ID: "client_id"}


def _entity_type(entity_type: str) -> str:
    if entity_type not in _ENTITY_FIELDS:
        raise KraftError("INVALID_REQUEST", f"unsupported quota entity type {entity_type!r} "
                                            f"({USER} or {CLIENT_ID})")
    return entity_type


def quota_filter(request: Any) -> QuotaFilter:
    components = []
    for c in request.components:
        match_type = MATCH_TYPES.get(c.match_type)
        if match_type is None:
            raise KraftError("INVALID_REQUEST", f"unknown match type {c.match_type}")
        if (match_type == "exact") != (c.match is not None):
            raise KraftError("INVALID_REQUEST", "an exact match names the entity, the others do not")
        components.append(QuotaComponent(_entity_type(c.entity_type), match_type, c.match))
    if len({c.entity_type for c in components}) != len(components):
        raise KraftError("INVALID_REQUEST", "an entity type appears twice in the filter")
    return QuotaFilter(tuple(components), request.strict)


def _wire_name(name: str) -> str | None:
    return None if name == QUOTA_DEFAULT else name


async def describe_client_quotas(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    quotas = services.security.describe_client_quotas(ctx, quota_filter(request))
    return {**error_fields(None), "entries": [{
        "entity": [{"entity_type": kind, "entity_name": _wire_name(name)}
                   for kind, name in ((USER, q.user), (CLIENT_ID, q.client_id)) if name is not None],
        "values": [{"key": key, "value": value} for key, value in sorted(q.quotas.items())],
    } for q in quotas]}


def _alteration(entry: Any) -> dict[str, Any]:
    """An entry as the service takes it: {entity: {user, client_id}, ops: [{key, value} |
    {key, remove: true}]}."""
    entity: dict[str, str | None] = {"user": None, "client_id": None}
    for part in entry.entity:
        field = _ENTITY_FIELDS[_entity_type(part.entity_type)]
        if entity[field] is not None:
            raise KraftError("INVALID_REQUEST", f"entity type {part.entity_type} appears twice in an entity")
        entity[field] = QUOTA_DEFAULT if part.entity_name is None else part.entity_name
    ops = [{"key": op.key, "remove": True} if op.remove else {"key": op.key, "value": float(op.value)}
           for op in entry.ops]
    return {"entity": entity, "ops": ops}


async def alter_client_quotas(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    outcome: KraftError | None = None
    try:
        await services.security.alter_client_quotas(ctx, [_alteration(e) for e in request.entries],
                                                    request.validate_only)
    except KraftError as e:
        outcome = e
    return {"entries": [{**error_fields(outcome), "entity": [
        {"entity_type": p.entity_type, "entity_name": p.entity_name} for p in e.entity]} for e in request.entries]}


APIS = (
    KafkaApi(DESCRIBE_CLIENT_QUOTAS, 0, 1, describe_client_quotas),
    KafkaApi(ALTER_CLIENT_QUOTAS, 0, 1, alter_client_quotas),
)

"""ListGroups, DescribeGroups and DeleteGroups over the Kafka protocol: thin adapters over the
group service, for classic and KIP-848 groups alike (kafka-consumer-groups --list / --describe /
--delete, the admin clients).

- ListGroups v0-v5: v4 filters by state, v5 by type ("classic", "consumer"); the groups the
  principal may Describe (all with Describe on the cluster).
- DescribeGroups v0-v5: a classic group as Kafka describes it (members' metadata and assignment
  only while Stable, the protocol name as `protocol_data`); a KIP-848 group with its members'
  subscriptions and assignments in the consumer protocol's encoding, as Kafka 4 answers for the
  tools that only know DescribeGroups. A group that does not exist is `Dead` with no error.
- DeleteGroups v0-v2: each group's own error (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ...).
"""

from __future__ import annotations

from typing import Any, Mapping

from kraft.errors import KraftError
from kraft.kafka.entities import error_code
from kraft.kafka.handling import KafkaApi
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

LIST_GROUPS = 16
DESCRIBE_GROUPS = 15
DELETE_GROUPS = 42

# DescribeGroups v3+ without include_authorized_operations (Kafka's "not asked")
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


async def list_groups(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    listed = await services.groups.list_groups(ctx)
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    return {"error_code": error_code(None), "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state, "group_type": g.group_type}
        for g in listed.groups
        if (not states or g.state.lower() in states) and (not types or g.group_type in types)]}


async def describe_groups(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    described = []
    for group_id in request.groups:
        try:
            d = await services.groups.describe_classic(ctx, group_id)
        except KraftError as e:
            described.append({"error_code": error_code(e), "error_message": e.message, "group_id": group_id,
                              "group_state": "", "protocol_type": "", "protocol_data": "", "members": (),
                              "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        described.append({
            "error_code": error_code(None), "group_id": group_id, "group_state": d.state,
            "protocol_type": d.protocol_type, "protocol_data": d.protocol,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                         "client_host": m.client_host, "member_metadata": m.metadata,
                         "member_assignment": m.assignment} for m in d.members],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
    return {"groups": described}


async def delete_groups(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    results = []
    for group_id in request.groups_names:
        try:
            await services.groups.delete_group(ctx, group_id)
            error = None
        except KraftError as e:
            error = e
        results.append({"group_id": group_id, "error_code": error_code(error)})
    return {"results": results}


APIS = (
    KafkaApi(LIST_GROUPS, 0, 5, list_groups),
    KafkaApi(DESCRIBE_GROUPS, 0, 5, describe_groups),
    KafkaApi(DELETE_GROUPS, 0, 2, delete_groups),
)

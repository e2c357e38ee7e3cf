"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka's classic group protocol, as thin
adapters from kio's request types to the group service (`GroupApis`) and back (Kafka's KafkaApis
handlers for them). The broker never reads the members' protocol metadata or assignments: it
picks the protocol every member supports, hands the leader everyone's metadata and everyone the
leader's assignment (client-side assignors: range, roundrobin, cooperative-sticky, ...).

Versions: JoinGroup v0-v9 (v4+: MEMBER_ID_REQUIRED first; v5+: group.instance.id), SyncGroup
v0-v5, Heartbeat v0-v4, LeaveGroup v0-v5 (v3+: a batch of members). JoinGroup v0 has no rebalance
timeout: the session timeout is used, as Kafka does. Errors are answered in the response's
error_code (kraft/kafka/handling.py); a JoinGroup that fails answers generation -1 and no leader,
MEMBER_ID_REQUIRED with the member id to join with.
"""

from __future__ import annotations

from typing import Any, Mapping

from kraft.broker.groups.classic import JoinRequest
from kraft.errors import KraftError
from kraft.kafka.entities import error_code
from kraft.kafka.handling import KafkaApi
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


async def join_group(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    version = ctx.api_version
    session_ms = _ms(request.session_timeout)
    join = JoinRequest(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=_ms(request.rebalance_timeout) if version >= 1 else session_ms,
        client_id=ctx.client_id,
        client_host=ctx.client_address,
        require_known_member_id=version >= 4,
    )
    try:
        result = await services.groups.join_group(ctx, request.group_id, join)
    except KraftError as e:
        if e.error_code != "MEMBER_ID_REQUIRED":
            raise  # answered with generation -1 and no leader
        return {"error_code": error_code(e), "generation_id": -1, "protocol_name": None if version >= 7 else "",
                "leader": "", "member_id": e.extra["member_id"], "members": ()}
    return {
        "error_code": error_code(None), "generation_id": result.generation_id, "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name or "", "leader": result.leader_id, "skip_assignment": False,
        "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                    for m in result.members],
    }


async def sync_group(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    protocol_type = getattr(request, "protocol_type", None)
    protocol_name = getattr(request, "protocol_name", None)
    try:
        assignment = await services.groups.sync_group(
            ctx, request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id, protocol_type, protocol_name,
            {a.member_id: bytes(a.assignment) for a in request.assignments})
    except KraftError as e:  # (an error answer's bytes field is empty, not Kafka's -1 for numbers)
        return {"error_code": error_code(e), "assignment": b""}
    return {"error_code": error_code(None), "protocol_type": protocol_type, "protocol_name": protocol_name,
            "assignment": assignment}


async def heartbeat(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    await services.groups.classic_heartbeat(ctx, request.group_id, request.member_id,
                                            getattr(request, "group_instance_id", None), request.generation_id)
    return {"error_code": error_code(None)}


async def leave_group(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    if ctx.api_version < 3:
        members: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    errors = await services.groups.leave_group(ctx, request.group_id, members)
    if ctx.api_version < 3:  # one member: its error is the answer's
        return {"error_code": error_code(errors[0])}
    return {"error_code": error_code(None), "members": [
        {"member_id": member_id, "group_instance_id": instance_id, "error_code": error_code(error)}
        for (member_id, instance_id), error in zip(members, errors)]}


APIS = (
    KafkaApi(JOIN_GROUP, 0, 9, join_group),
    KafkaApi(SYNC_GROUP, 0, 5, sync_group),
    KafkaApi(HEARTBEAT, 0, 4, heartbeat),
    KafkaApi(LEAVE_GROUP, 0, 5, leave_group),
)

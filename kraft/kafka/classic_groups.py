"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka's classic group protocol, as thin
adapters from kio's request types to the group service and back (Kafka's KafkaApis handlers for
them). The broker never reads the members' protocol metadata or assignments: it picks the
protocol every member supports, hands the leader everyone's metadata and everyone the leader's
assignment (client-side assignors: range, roundrobin, cooperative-sticky, ...).

Versions: JoinGroup v0-v9 (v4+: MEMBER_ID_REQUIRED first; v5+: group.instance.id), SyncGroup
v0-v5, Heartbeat v0-v4, LeaveGroup v0-v5 (v3+: a batch of members). JoinGroup v0 has no rebalance
timeout: the session timeout is used, as Kafka does. Errors are answered in the response's
error_code; a JoinGroup that fails answers generation -1 and no leader.
"""

from __future__ import annotations

from typing import Any, Protocol

from kraft.errors import KraftError
from kraft.broker.groups.classic import JoinRequest, JoinResult
from kraft.kafka.answers import answer, build, error_code, nested_type, response_type
from kraft.kafka.dispatch import HandlerRegistry
from kraft.server.request_context import RequestContext

JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14


class ClassicGroupApis(Protocol):
    """The group service's classic calls (authorized through the context)."""

    async def join_group(self, ctx: RequestContext, group_id: str, request: JoinRequest) -> JoinResult: ...

    async def sync_group(self, ctx: RequestContext, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> bytes: ...

    async def classic_heartbeat(self, ctx: RequestContext, group_id: str, member_id: str,
                                group_instance_id: str | None, generation_id: int) -> None: ...

    async def leave_group(self, ctx: RequestContext, group_id: str,
                          members: list[tuple[str, str | None]]) -> list[str | None]: ...


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


class ClassicGroupHandlers:
    def __init__(self, groups: ClassicGroupApis) -> None:
        self.groups = groups

    def register(self, registry: HandlerRegistry) -> None:
        registry.register_all({JOIN_GROUP: (0, 9, self.join_group), SYNC_GROUP: (0, 5, self.sync_group),
                               HEARTBEAT: (0, 4, self.heartbeat), LEAVE_GROUP: (0, 5, self.leave_group)})

    async def join_group(self, ctx: RequestContext, request: Any) -> Any:
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
            result = await self.groups.join_group(ctx, request.group_id, join)
        except KraftError as e:
            return answer(JOIN_GROUP, version, error_code=error_code(e), generation_id=-1,
                          protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
                          member_id=e.extra.get("member_id", request.member_id), members=())
        member = nested_type(response_type(JOIN_GROUP, version), "members")
        return answer(
            JOIN_GROUP, version, error_code=error_code(None), generation_id=result.generation_id,
            protocol_type=result.protocol_type, protocol_name=result.protocol_name or "",
            leader=result.leader_id, skip_assignment=False, member_id=result.member_id,
            members=tuple(build(member, member_id=m.member_id, group_instance_id=m.group_instance_id,
                                metadata=m.metadata) for m in result.members),
        )

    async def sync_group(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        protocol_type = getattr(request, "protocol_type", None)
        protocol_name = getattr(request, "protocol_name", None)
        try:
            assignment = await self.groups.sync_group(
                ctx, request.group_id, request.member_id, getattr(request, "group_instance_id", None),
                request.generation_id, protocol_type, protocol_name,
                {a.member_id: bytes(a.assignment) for a in request.assignments})
        except KraftError as e:
            return answer(SYNC_GROUP, version, error_code=error_code(e), assignment=b"")
        return answer(SYNC_GROUP, version, error_code=error_code(None), protocol_type=protocol_type,
                      protocol_name=protocol_name, assignment=assignment)

    async def heartbeat(self, ctx: RequestContext, request: Any) -> Any:
        try:
            await self.groups.classic_heartbeat(ctx, request.group_id, request.member_id,
                                                getattr(request, "group_instance_id", None), request.generation_id)
        except KraftError as e:
            return answer(HEARTBEAT, ctx.api_version, error_code=error_code(e))
        return answer(HEARTBEAT, ctx.api_version, error_code=error_code(None))

    async def leave_group(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        if version < 3:
            members: list[tuple[str, str | None]] = [(request.member_id, None)]
        else:
            members = [(m.member_id, m.group_instance_id) for m in request.members]
        try:
            errors = await self.groups.leave_group(ctx, request.group_id, members)
        except KraftError as e:
            return answer(LEAVE_GROUP, version, error_code=error_code(e), members=())
        if version < 3:  # one member: its error is the answer's
            return answer(LEAVE_GROUP, version, error_code=error_code(errors[0]))
        entry = nested_type(response_type(LEAVE_GROUP, version), "members")
        return answer(LEAVE_GROUP, version, error_code=error_code(None), members=tuple(
            build(entry, member_id=member_id, group_instance_id=instance_id, error_code=error_code(error))
            for (member_id, instance_id), error in zip(members, errors)))

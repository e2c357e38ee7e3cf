"""The classic group calls of the Kafka listener over the group coordinator, until the broker's
service layer (kraft/server) authorizes them through the request context: with an authorizer
configured they are refused (GROUP_AUTHORIZATION_FAILED) rather than served unchecked."""

from __future__ import annotations

from kraft.api.errors import KraftError
from kraft.broker.groups.classic import JoinRequest, JoinResult
from kraft.broker.groups.coordinator import GroupCoordinator
from kraft.server.request_context import RequestContext


class CoordinatorGroups:
    def __init__(self, coordinator: GroupCoordinator, authorizer_configured: bool) -> None:
        self.coordinator = coordinator
        self.authorizer_configured = authorizer_configured

    def _check(self, group_id: str) -> None:
        if self.authorizer_configured:
            raise KraftError("GROUP_AUTHORIZATION_FAILED", f"not authorized for group {group_id!r}")

    async def join_group(self, ctx: RequestContext, group_id: str, request: JoinRequest) -> JoinResult:
        self._check(group_id)
        return await self.coordinator.join_group(group_id, request)

    async def sync_group(self, ctx: RequestContext, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> bytes:
        self._check(group_id)
        return await self.coordinator.sync_group(group_id, member_id, group_instance_id, generation_id,
                                                 protocol_type, protocol_name, assignments)

    async def classic_heartbeat(self, ctx: RequestContext, group_id: str, member_id: str,
                                group_instance_id: str | None, generation_id: int) -> None:
        self._check(group_id)
        await self.coordinator.classic_heartbeat(group_id, member_id, group_instance_id, generation_id)

    async def leave_group(self, ctx: RequestContext, group_id: str,
                          members: list[tuple[str, str | None]]) -> list[str | None]:
        self._check(group_id)
        return await self.coordinator.leave_group(group_id, members)

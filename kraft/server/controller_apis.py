"""Kafka's admin APIs only the active controller answers (DescribeQuorum, ElectLeaders,
List/AlterPartitionReassignments), authorized through the request context (`access.py`: Describe
or Alter on the cluster) and run on this node's controller API, which answers NOT_CONTROLLER
naming the active controller unless it is that one. (A listener forwards such a request whole to
the active controller first, KIP-590, so the controller authorizes the client.) The answers are
the controller's own maps.
"""

from __future__ import annotations

from typing import Any, Iterable

from kraft.errors import KraftError
from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE
from kraft.server.access import (
    ALTER_PARTITION_REASSIGNMENTS, CLUSTER, DESCRIBE_QUORUM, ELECT_LEADERS, LIST_PARTITION_REASSIGNMENTS, rule_of,
)
from kraft.server.admin import ControllerApi
from kraft.server.authorization import Authorization
from kraft.server.request_context import RequestContext


class ControllerApis:
    def __init__(self, controller: ControllerApi | None, authorization: Authorization) -> None:
        self._controller = controller
        self.auth = authorization

    def _api(self, ctx: RequestContext, api: str) -> ControllerApi:
        self.auth.require(ctx, rule_of(api, CLUSTER_TYPE, CLUSTER))
        if self._controller is None:
            raise KraftError("NOT_CONTROLLER", "this node serves no controller API")
        return self._controller

    async def describe_quorum(self, ctx: RequestContext) -> dict[str, Any]:
        return await self._api(ctx, DESCRIBE_QUORUM).describe_quorum()

    async def elect_leaders(self, ctx: RequestContext, partitions: Iterable[tuple[str, int]] | None,
                            request_id: str | None) -> dict[str, Any]:
        """Preferred leader election (the only type: unclean elections follow the topic config)."""
        return await self._api(ctx, ELECT_LEADERS).elect_leaders(partitions, request_id)

    async def list_partition_reassignments(self, ctx: RequestContext) -> dict[str, Any]:
        return await self._api(ctx, LIST_PARTITION_REASSIGNMENTS).list_partition_reassignments()

    async def alter_partition_reassignments(self, ctx: RequestContext, reassignments: list[dict[str, Any]],
                                            request_id: str | None) -> dict[str, Any]:
        """Start (`replicas`: the target) or cancel (`replicas`: None) reassignments, all or none."""
        return await self._api(ctx, ALTER_PARTITION_REASSIGNMENTS).alter_partition_reassignments(
            reassignments, request_id)

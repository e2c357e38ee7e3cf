"""Kafka's admin APIs only the active controller answers (DescribeQuorum, ElectLeaders,
List/AlterPartitionReassignments), authorized through the request context (`access.py`: Describe
or Alter on the cluster) and run on the active controller. On this node's controller API when it
is the active one; otherwise a client's request is forwarded there through the controller's
inter-node API as this node (`ControllerRemote`), once it was authorized here against the same
ACLs (Kafka's forwarding, KIP-590: every broker accepts them). A listener that forwards requests
whole itself (the HTTP routes) marks them `forwarded_by`, and those, like the nodes' own calls,
are never forwarded again: a node that is not the controller answers NOT_CONTROLLER naming it.
The answers are the controller's own maps.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable, Protocol

from kraft.errors import KraftError
from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE
from kraft.server.access import (
    ALTER_PARTITION_REASSIGNMENTS, CLUSTER, DESCRIBE_QUORUM, ELECT_LEADERS, LIST_PARTITION_REASSIGNMENTS, rule_of,
)
from kraft.server.admin import ControllerApi
from kraft.server.authorization import Authorization
from kraft.server.request_context import RequestContext

# the controller's inter-node API (api/routes/controller.py) these requests are forwarded to
QUORUM_PATH = "/v1/controller/quorum"
ELECT_LEADERS_PATH = "/v1/controller/elect-leaders"
REASSIGNMENTS_PATH = "/v1/controller/reassignments"


class ControllerRemote(Protocol):
    """The active controller's API as this node calls it (kraft/controller/client.py), following
    NOT_CONTROLLER to the active controller."""

    async def call(self, method: str, path: str, body: Any = None) -> Any: ...


class ControllerApis:
    def __init__(self, controller: ControllerApi | None, authorization: Authorization,
                 remote: ControllerRemote | None = None) -> None:
        self._controller = controller
        self.auth = authorization
        self._remote = remote

    def _local(self, ctx: RequestContext, api: str) -> ControllerApi | None:
        """This node's controller API when it answers the request (None: forward it)."""
        self.auth.require(ctx, rule_of(api, CLUSTER_TYPE, CLUSTER))
        local = self._controller
        forwardable = self._remote is not None and not ctx.is_node and ctx.forwarded_by is None
        if forwardable and (local is None or not local.is_active()):
            return None
        if local is None:
            raise KraftError("NOT_CONTROLLER", "this node serves no controller API")
        return local

    async def _forward(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        assert self._remote is not None
        answer = await self._remote.call(method, path, body)
        return dict(answer)

    async def describe_quorum(self, ctx: RequestContext) -> dict[str, Any]:
        local = self._local(ctx, DESCRIBE_QUORUM)
        return await (local.describe_quorum() if local else self._forward("GET", QUORUM_PATH))

    async def elect_leaders(self, ctx: RequestContext, partitions: Iterable[tuple[str, int]] | None,
                            request_id: str | None) -> dict[str, Any]:
        """Preferred leader election (the only type: unclean elections follow the topic config)."""
        local = self._local(ctx, ELECT_LEADERS)
        if local:
            return await local.elect_leaders(partitions, request_id)
        wanted = None if partitions is None else [list(p) for p in partitions]
        return await self._forward("POST", ELECT_LEADERS_PATH, {"partitions": wanted, "request_id": _id(request_id)})

    async def list_partition_reassignments(self, ctx: RequestContext) -> dict[str, Any]:
        local = self._local(ctx, LIST_PARTITION_REASSIGNMENTS)
        return await (local.list_partition_reassignments() if local else self._forward("GET", REASSIGNMENTS_PATH))

    async def alter_partition_reassignments(self, ctx: RequestContext, reassignments: list[dict[str, Any]],
                                            request_id: str | None) -> dict[str, Any]:
        """Start (`replicas`: the target) or cancel (`replicas`: None) reassignments, all or none."""
        local = self._local(ctx, ALTER_PARTITION_REASSIGNMENTS)
        if local:
            return await local.alter_partition_reassignments(reassignments, request_id)
        return await self._forward("POST", REASSIGNMENTS_PATH,
                                   {"partitions": reassignments, "request_id": _id(request_id)})


def _id(request_id: str | None) -> str:
    """One id for every attempt of a forwarded change: a retry after an unknown outcome (the
    client follows NOT_CONTROLLER) is applied once."""
    return request_id or uuid.uuid4().hex

"""The admin services the Kafka admin APIs added to kraft/server: client quota filters (Kafka's
ClientQuotaFilter), the controller's admin APIs forwarded to the active controller from any node
(KIP-590) but never a node's own or an already forwarded request, and the replica manager's
producer state for DescribeProducers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraft.broker.replica_manager import ReplicaManager
from kraft.errors import KraftError
from kraft.log.batch import build_batch
from kraft.log.config import LogConfig
from kraft.server.authorization import Authorization
from kraft.server.controller_apis import ControllerApis
from kraft.server.records import ProduceEntry
from kraft.server.replica_admin import ActiveProducer
from kraft.server.request_context import RequestContext, node_context
from kraft.server.security_admin import QuotaComponent, QuotaDescription, QuotaFilter

from tests.unit.broker.test_broker_partition_state import NODE, led_image

ALICE = RequestContext("User:alice", "10.0.0.8", "PLAINTEXT")
ENTITIES = [QuotaDescription("bob", None, {}), QuotaDescription("bob", "app", {}),
            QuotaDescription("<default>", None, {}), QuotaDescription(None, "app", {}),
            QuotaDescription(None, "<default>", {})]


def matching(*components: QuotaComponent, strict: bool = False) -> list[tuple[str | None, str | None]]:
    flt = QuotaFilter(components, strict)
    return [(q.user, q.client_id) for q in ENTITIES if flt.matches(q)]


def test_quota_filters_match_as_kafkas_client_quota_filter() -> None:
    assert matching() == [(q.user, q.client_id) for q in ENTITIES]
    assert matching(strict=True) == []
    assert matching(QuotaComponent("user", "exact", "bob")) == [("bob", None), ("bob", "app")]
    assert matching(QuotaComponent("user", "exact", "bob"), strict=True) == [("bob", None)]
    assert matching(QuotaComponent("user", "default")) == [("<default>", None)]
    assert matching(QuotaComponent("user", "any"), strict=True) == [("bob", None), ("<default>", None)]
    assert matching(QuotaComponent("client-id", "default")) == [(None, "<default>")]
    assert matching(QuotaComponent("user", "exact", "bob"), QuotaComponent("client-id", "any")) == [("bob", "app")]
    assert matching(QuotaComponent("user", "exact", "<default>")) == []  # the default is matched as such


class Controller:
    def __init__(self, active: bool) -> None:
        self.active = active
        self.calls: list[str] = []

    def is_active(self) -> bool:
        return self.active

    async def describe_quorum(self) -> dict[str, Any]:
        if not self.active:
            raise KraftError("NOT_CONTROLLER", "node 2 is the active controller")
        self.calls.append("describe_quorum")
        return {"leader_id": 1}

    async def elect_leaders(self, partitions: Any, request_id: str | None) -> dict[str, Any]:
        if not self.active:
            raise KraftError("NOT_CONTROLLER", "node 2 is the active controller")
        self.calls.append("elect_leaders")
        return {"partitions": []}


class Remote:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        self.calls.append((method, path, body))
        return {"leader_id": 2, "partitions": []}


async def test_a_clients_controller_request_is_forwarded_from_a_node_that_is_not_the_controller() -> None:
    remote = Remote()
    apis = ControllerApis(Controller(active=False), Authorization(), remote)
    assert (await apis.describe_quorum(ALICE))["leader_id"] == 2
    await apis.elect_leaders(ALICE, [("t", 0)], None)
    assert [(m, p) for m, p, _ in remote.calls] == [("GET", "/v1/controller/quorum"),
                                                    ("POST", "/v1/controller/elect-leaders")]
    body = remote.calls[1][2]
    assert body["partitions"] == [["t", 0]] and body["request_id"]  # one id for every retry
    broker_only = ControllerApis(None, Authorization(), remote)
    assert (await broker_only.describe_quorum(ALICE))["leader_id"] == 2


async def test_the_active_controller_answers_itself_and_nodes_or_forwarded_requests_are_not_forwarded_again() -> None:
    remote = Remote()
    active = Controller(active=True)
    assert (await ControllerApis(active, Authorization(), remote).describe_quorum(ALICE))["leader_id"] == 1
    standby = ControllerApis(Controller(active=False), Authorization(), remote)
    for ctx in (node_context(3, "10.0.0.3", "PLAINTEXT"), RequestContext("User:alice", "h", "CLIENT", forwarded_by=3)):
        with pytest.raises(KraftError) as refused:
            await standby.describe_quorum(ctx)
        assert refused.value.error_code == "NOT_CONTROLLER"
    assert remote.calls == [] and active.calls == ["describe_quorum"]


async def test_a_forwarded_request_is_authorized_first() -> None:
    class DenyAll:
        def authorize(self, *_: Any) -> bool:
            return False

        def denied(self, resource_type: str) -> None:
            pass

    remote = Remote()
    with pytest.raises(KraftError) as refused:
        await ControllerApis(None, Authorization(DenyAll()), remote).elect_leaders(ALICE, None, None)
    assert refused.value.error_code == "CLUSTER_AUTHORIZATION_FAILED" and remote.calls == []


async def test_the_leader_describes_its_idempotent_producers_and_a_follower_refuses(tmp_path: Path) -> None:
    manager = ReplicaManager(NODE, tmp_path, LogConfig(), 3_600_000, 1 << 20)
    manager.on_metadata_update(None, led_image())
    for p in (0, 1):
        await manager.replica("t", p).wait_ready()
    try:
        for sequence in (0, 3):
            batch = build_batch([(None, b"v", (), 1_700_000_000_000 + sequence)] * 3, producer_id=77,
                                producer_epoch=1, base_sequence=sequence)
            [result] = await manager.produce([ProduceEntry("t", 0, batch)], acks=1, timeout_ms=1000)
            assert result.error_code is None
        assert await manager.active_producers("t", 0) == [ActiveProducer(77, 1, 5, 1_700_000_000_003)]
        with pytest.raises(KraftError) as follower:
            await manager.active_producers("t", 1)
        assert follower.value.error_code == "NOT_LEADER_OR_FOLLOWER"
        with pytest.raises(KraftError) as unknown:
            await manager.active_producers("nope", 0)
        assert unknown.value.error_code == "UNKNOWN_TOPIC_OR_PARTITION"
    finally:
        await manager.close()

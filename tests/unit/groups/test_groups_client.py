"""The consumer's group client without a network: coordinator rediscovery and retries, and the
background heartbeat's hand-over to poll (a loss wins, max_poll_interval_ms leaves)."""

from __future__ import annotations

import time
from typing import Any

from kraft.api.client.group import GroupCoordinatorClient, GroupMembership, HeartbeatResult
from kraft.api.client.types import TopicPartition
from kraft.api.errors import KraftError

A, B = ("10.0.0.1", 1), ("10.0.0.2", 2)
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class FakeTransport:
    """Answers each request with the next scripted item (a KraftError is raised)."""

    def __init__(self, coordinator: tuple[str, int], script: list[Any]) -> None:
        self.coordinator = coordinator
        self.script = script
        self.sent: list[tuple[str, str, Any, Any]] = []

    def request(self, method: str, path: str, body: Any = None, *, params: Any = None,
                address: Any = None, timeout_s: float | None = None) -> Any:
        if path.endswith("/coordinator"):
            host, port = self.coordinator
            return {"coordinator": {"node_id": port, "host": host, "port": port}}
        self.sent.append((method, path, body, address))
        item = self.script.pop(0)
        if isinstance(item, KraftError):
            raise item
        return item


def heartbeat_answer(member_id: str, epoch: int, *tps: TopicPartition) -> dict[str, Any]:
    return {"member_id": member_id, "member_epoch": epoch, "heartbeat_interval_ms": 1000,
            "assignment": [{"topic": tp.topic, "partitions": [tp.partition]} for tp in tps]}


def test_coordinator_errors_rediscover_and_retry_with_backoff() -> None:
    moved = KraftError("NOT_COORDINATOR", "moved", coordinator={"node_id": 2, "host": B[0], "port": B[1]})
    transport = FakeTransport(A, [moved, KraftError("COORDINATOR_LOAD_IN_PROGRESS", "loading"),
                                  KraftError("COORDINATOR_NOT_AVAILABLE", "no leader"), {"offsets": []}])
    client = GroupCoordinatorClient(transport, "g", timeout_s=5, backoff_s=0.001)  # type: ignore[arg-type]
    assert client.committed([TP0]) == {TP0: None}
    # A first, then B as named, B again while it loads, then A found anew after "not available"
    assert [address for *_, address in transport.sent] == [A, B, B, A]


def test_fatal_errors_are_not_retried() -> None:
    transport = FakeTransport(A, [KraftError("GROUP_ID_NOT_FOUND", "no such group")])
    client = GroupCoordinatorClient(transport, "g", timeout_s=5, backoff_s=0.001)  # type: ignore[arg-type]
    try:
        client.request("GET")
    except KraftError as e:
        assert e.error_code == "GROUP_ID_NOT_FOUND"
    else:
        raise AssertionError("GROUP_ID_NOT_FOUND was retried or swallowed")
    assert len(transport.sent) == 1


def member(script: list[Any], rebalance_timeout_ms: int = 60_000) -> tuple[GroupMembership, FakeTransport]:
    transport = FakeTransport(A, script)
    client = GroupCoordinatorClient(transport, "g", timeout_s=5, backoff_s=0.001)  # type: ignore[arg-type]
    m = GroupMembership(client, "c", None, rebalance_timeout_ms)
    m.subscribe(["t"], None)
    return m, transport


def test_background_heartbeat_reports_owned_and_leaves_the_answer_for_poll() -> None:
    m, transport = member([heartbeat_answer("m1", 1, TP0), heartbeat_answer("m1", 2, TP0, TP1)])
    m.background_tick()
    assert transport.sent == []  # not joined: joining is poll's
    assert m.heartbeat(m.owned).assignment == {TP0}
    m.owned = frozenset({TP0})
    m.request_heartbeat()
    m.background_tick()
    assert transport.sent[-1][2]["owned_partitions"] == [{"topic": "t", "partitions": [0]}]
    assert transport.sent[-1][2]["member_epoch"] == 1
    assert m.take_pending() == HeartbeatResult({TP0, TP1})
    assert m.take_pending() is None and m.member_epoch == 2


def test_a_loss_is_not_overwritten_before_poll_sees_it() -> None:
    fenced = KraftError("FENCED_MEMBER_EPOCH", "fenced")
    m, _ = member([heartbeat_answer("m1", 1, TP0), fenced])
    m.heartbeat(())
    m.request_heartbeat()
    m.background_tick()  # fenced: epoch 0, partitions lost
    assert not m.joined
    m.background_tick()  # not joined: nothing sent, the loss stays
    assert m.take_pending() == HeartbeatResult(set(), lost=True)


def test_no_poll_for_the_rebalance_timeout_leaves_the_group() -> None:
    m, transport = member([heartbeat_answer("m1", 1, TP0), {"member_id": "m1", "member_epoch": -1}],
                          rebalance_timeout_ms=10)
    m.heartbeat(())
    m.last_poll = time.monotonic() - 1
    m.background_tick()
    assert transport.sent[-1][2] == {"member_id": "m1", "member_epoch": -1}
    assert (m.member_id, m.member_epoch) == ("", 0)
    assert m.take_pending() == HeartbeatResult(set(), lost=True)
    assert m.heartbeat_due()  # the next poll rejoins at once

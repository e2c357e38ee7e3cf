"""The protocol-neutral services (kraft/server): each applies its Kafka API's rules of
kraft/server/access.py through the request context (the principal and address an authorizer is
asked about, Kafka's audit line naming the API), charges the context's quota entity, never
authorizes or throttles the cluster's own nodes, and answers typed results. Fakes stand for the
parts below the services (the authorizer's ACLs, the replica manager, the coordinator)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Sequence

import pytest

from kraft.errors import KraftError
from kraft.server.access import NAMED, PRODUCE, rule_of
from kraft.server.authorization import Authorization
from kraft.server.controller_apis import ControllerApis
from kraft.server.group_apis import GroupApis
from kraft.server.groups import GroupDescription, MemberDescription, OffsetLag, TopicPartitions
from kraft.server.metadata import ClusterDescription, NodeInfo, PartitionDescription, TopicDescription
from kraft.server.quotas import Quotas
from kraft.server.record_apis import FetchRequest, RecordApis
from kraft.server.records import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, FetchEntry, FetchPartitionResult, PartitionOffsets, ProduceEntry,
    ProducePartitionResult,
)
from kraft.server.request_context import RequestContext, node_context
from kraft.server.security_apis import SecurityApis
from kraft.server.topic_apis import TopicApis

ALICE = RequestContext("User:alice", "10.0.0.8", "CLIENT", client_id="app-1", api="Produce")
NODE_2 = node_context(2, "10.0.0.2", "CLIENT")


class Acls:
    """An authorizer allowing exactly `allowed`: (operation, resource type, name) for anyone."""

    def __init__(self, *allowed: tuple[str, str, str]) -> None:
        self.allowed = set(allowed)
        self.asked: list[tuple[str, str, str, str, str]] = []
        self.denials: list[str] = []

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> bool:
        self.asked.append((principal, host, operation, resource_type, resource_name))
        return (operation, resource_type, resource_name) in self.allowed

    def denied(self, resource_type: str) -> None:
        self.denials.append(resource_type)


class Replicas:
    def __init__(self) -> None:
        self.produced: list[ProduceEntry] = []
        self.fetches: list[tuple[int, int, list[FetchEntry]]] = []

    async def produce(self, entries: Sequence[ProduceEntry], acks: int, timeout_ms: int) -> list[ProducePartitionResult]:
        self.produced.extend(entries)
        return [ProducePartitionResult(e.topic, e.partition, 0, 0) for e in entries]

    async def replica_fetch(self, replica_id: int, replica_epoch: int, entries: Sequence[FetchEntry],
                            max_wait_ms: int, min_bytes: int, max_bytes: int) -> list[FetchPartitionResult]:
        self.fetches.append((replica_id, replica_epoch, list(entries)))
        return [FetchPartitionResult(e.topic, e.partition, 10, 0, 10, b"x" * 100) for e in entries]

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return PartitionOffsets(3, 10, 12)

    async def offset_for_timestamp(self, topic: str, partition: int, timestamp: int,
                                   read_committed: bool = False) -> tuple[int, int] | None:
        return (5, 1_700_000_000_123) if timestamp <= 1_700_000_000_123 else None


class View:
    def __init__(self, *names: str) -> None:
        self.names = names

    def cluster(self, listener: str | None = None) -> ClusterDescription:
        return ClusterDescription("c1", 1, ())

    def topics(self) -> list[TopicDescription]:
        return [self._describe(n) for n in self.names]

    def topic(self, name: str) -> TopicDescription | None:
        return self._describe(name) if name in self.names else None

    def topic_defaults(self) -> dict[str, str]:
        return {}

    @staticmethod
    def _describe(name: str) -> TopicDescription:
        return TopicDescription(name, f"id-{name}", False, (PartitionDescription(0, 1, 0, (1,), (1,)),), {})


class QuotaRecorder:
    def __init__(self, throttle_ms: int) -> None:
        self.throttle_ms = throttle_ms
        self.recorded: list[tuple[str, str, str, float]] = []

    def record(self, kind: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        self.recorded.append((kind, principal, client_id, value))
        return self.throttle_ms


def records_apis(acls: Acls | None, *topics: str, quotas: Quotas | None = None,
                 refused: list[str] | None = None) -> tuple[RecordApis, Replicas]:
    replicas = Replicas()
    authorization = Authorization(acls, node_refused=lambda: (refused if refused is not None else []).append("node"))
    info = NodeInfo(1, ("broker",), 1 << 20, auto_create_topics=False, fetch_max_bytes=1 << 20)
    topic_apis = TopicApis(info, View(*topics), None, authorization)  # type: ignore[arg-type]
    return RecordApis(replicas, topic_apis, authorization, quotas or Quotas()), replicas  # type: ignore[arg-type]


async def test_produce_refuses_only_the_partitions_of_a_topic_that_may_not_be_written(
        caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's handleProduceRequest: TOPIC_AUTHORIZATION_FAILED on the refused topic's partitions,
    the others appended; an unknown topic (no auto-creation here) fails its own partitions only."""
    acls = Acls(("WRITE", "TOPIC", "a"), ("WRITE", "TOPIC", "gone"))
    apis, replicas = records_apis(acls, "a", "b")
    with caplog.at_level(logging.INFO, logger="kraft.authorizer"):
        answer = await apis.produce(ALICE, [ProduceEntry("b", 0, b"batch"), ProduceEntry("a", 0, b"batch"),
                                            ProduceEntry("gone", 0, b"batch"), ProduceEntry("b", 1, b"batch")],
                                    -1, 1000)
    assert [(r.topic, r.partition, r.error_code) for r in answer.partitions] == [
        ("b", 0, "TOPIC_AUTHORIZATION_FAILED"), ("a", 0, None), ("gone", 0, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("b", 1, "TOPIC_AUTHORIZATION_FAILED")]
    assert "[b]" in (answer.partitions[0].message or "")
    assert [(e.topic, e.partition) for e in replicas.produced] == [("a", 0)]
    assert ("User:alice", "10.0.0.8", "WRITE", "TOPIC", "b") in acls.asked  # the context's principal and address
    assert acls.denials == ["TOPIC"]  # once for the request
    assert caplog.text.count("Principal = User:alice is Denied operation = Write from host = 10.0.0.8 on resource = "
                             "Topic:LITERAL:b for request = Produce") == 1


async def test_a_produce_to_existing_topics_starts_no_task() -> None:
    """The hot path: each task is two more turns of the event loop, behind whatever else is ready
    to run there; only a missing topic's lookup-or-create runs as one (concurrently with others)."""
    apis, replicas = records_apis(Acls(), "a", "b")
    loop = asyncio.get_running_loop()
    started: list[Any] = []

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        started.append(coro)
        return asyncio.Task(coro, loop=loop, **kwargs)

    previous = loop.get_task_factory()
    loop.set_task_factory(counting)
    try:
        answer = await apis.produce(NODE_2, [ProduceEntry("a", 0, b"x"), ProduceEntry("b", 0, b"x"),
                                             ProduceEntry("gone", 0, b"x")], 1, 1000)
    finally:
        loop.set_task_factory(previous)
    assert [r.error_code for r in answer.partitions] == [None, None, "UNKNOWN_TOPIC_OR_PARTITION"]
    assert [(e.topic, e.partition) for e in replicas.produced] == [("a", 0), ("b", 0)]
    assert len(started) == 1  # "gone"'s


async def test_produce_and_fetch_charge_the_contexts_quota_entity_and_nodes_go_free() -> None:
    quota = QuotaRecorder(throttle_ms=250)
    apis, replicas = records_apis(Acls(), "a", quotas=Quotas(quota, clock_ms=lambda: 0))
    produced = await apis.produce(NODE_2, [ProduceEntry("a", 0, b"12345")], 1, 1000)  # a node: no ACL asked
    assert produced.throttle_time_ms == 0 and quota.recorded == [] and len(replicas.produced) == 1
    apis.auth.authorizer = None  # no authorizer: every client is allowed
    produced = await apis.produce(ALICE, [ProduceEntry("a", 0, b"12345")], 1, 1000)
    assert produced.throttle_time_ms == 250 and quota.recorded == [("produce", "User:alice", "app-1", 5)]
    fetched = await apis.fetch(ALICE.for_api("Fetch"), FetchRequest([FetchEntry("a", 0, 0, 1 << 20)], 0, 1, 1 << 20))
    assert fetched.throttle_time_ms == 250 and quota.recorded[-1] == ("fetch", "User:alice", "app-1", 100)
    assert fetched.partitions[0].records == b"x" * 100


async def test_a_replica_fetch_is_the_replica_nodes_own() -> None:
    refused: list[str] = []
    apis, replicas = records_apis(Acls(("READ", "TOPIC", "a")), "a", refused=refused)
    replica_fetch = FetchRequest([FetchEntry("a", 0, 0, 1 << 20, 0, 0)], 0, 1, 1 << 20, replica_id=2, replica_epoch=7)
    for ctx in (ALICE.for_api("Fetch"), node_context(3, "10.0.0.3", "CLIENT").for_api("Fetch")):
        with pytest.raises(KraftError) as error:
            await apis.fetch(ctx, replica_fetch)
        assert error.value.error_code == "CLUSTER_AUTHORIZATION_FAILED"
    assert refused == ["node", "node"] and replicas.fetches == []
    answered = await apis.fetch(NODE_2.for_api("Fetch"), replica_fetch)
    assert answered.throttle_time_ms == 0 and replicas.fetches[0][:2] == (2, 7)
    # a consumer's fetch is Read on every topic; one naming no partition is answered at once
    assert (await apis.fetch(ALICE, FetchRequest([], 500, 1, 1 << 20))).partitions == []
    with pytest.raises(KraftError) as error:
        await apis.fetch(ALICE, FetchRequest([FetchEntry("b", 0, 0, 1 << 20)], 0, 1, 1 << 20))
    assert error.value.error_code == "TOPIC_AUTHORIZATION_FAILED"


async def test_list_offsets_earliest_latest_and_by_timestamp() -> None:
    apis, _ = records_apis(Acls(("DESCRIBE", "TOPIC", "a")), "a")
    ctx = ALICE.for_api("ListOffsets")
    assert (await apis.list_offsets(ctx, "a", 0, EARLIEST_TIMESTAMP)).offset == 3
    assert (await apis.list_offsets(ctx, "a", 0, LATEST_TIMESTAMP)).offset == 10
    found = await apis.list_offsets(ctx, "a", 0, 1_600_000_000_000)
    assert (found.offset, found.timestamp) == (5, 1_700_000_000_123)
    assert (await apis.list_offsets(ctx, "a", 0, 1_800_000_000_000)).offset is None
    with pytest.raises(KraftError) as error:
        await apis.list_offsets(ctx, "b", 0, EARLIEST_TIMESTAMP)
    assert error.value.error_code == "TOPIC_AUTHORIZATION_FAILED"


async def test_metadata_lists_what_may_be_described_and_reports_refused_names() -> None:
    authorization = Authorization(Acls(("DESCRIBE", "TOPIC", "a")))
    info = NodeInfo(1, ("broker",), 1 << 20, auto_create_topics=False, fetch_max_bytes=1 << 20)
    topics = TopicApis(info, View("a", "b"), None, authorization)  # type: ignore[arg-type]
    ctx = ALICE.for_api("Metadata")
    assert [t.name for t in (await topics.metadata(ctx, None, False)).topics] == ["a"]
    answer = await topics.metadata(ctx, ["a", "b", "missing"], False)
    assert [t.name for t in answer.topics] == ["a"]
    assert {e.name: e.error.error_code for e in answer.topic_errors} == {
        "b": "TOPIC_AUTHORIZATION_FAILED", "missing": "TOPIC_AUTHORIZATION_FAILED"}
    with pytest.raises(KraftError) as error:
        topics.describe_topic(ctx, "b")
    assert error.value.error_code == "TOPIC_AUTHORIZATION_FAILED"


def test_a_topic_id_resolves_only_for_a_principal_that_may_describe_the_topic() -> None:
    """DeleteTopics by id: the name of a topic the principal may describe; an unknown id is
    UNKNOWN_TOPIC_ID; a topic it may not describe is TOPIC_AUTHORIZATION_FAILED naming only the id."""
    authorization = Authorization(Acls(("DESCRIBE", "TOPIC", "a")))
    info = NodeInfo(1, ("broker",), 1 << 20, auto_create_topics=False, fetch_max_bytes=1 << 20)
    topics = TopicApis(info, View("a", "secret"), None, authorization)  # type: ignore[arg-type]
    ctx = ALICE.for_api("DeleteTopics")
    assert topics.name_of_id(ctx, "id-a") == "a"
    for topic_id, code in (("id-missing", "UNKNOWN_TOPIC_ID"), ("id-secret", "TOPIC_AUTHORIZATION_FAILED")):
        with pytest.raises(KraftError) as error:
            topics.name_of_id(ctx, topic_id)
        assert error.value.error_code == code and "secret" not in error.value.message.replace("id-secret", "")


class Groups:
    async def describe_group(self, group_id: str) -> GroupDescription:
        member = MemberDescription("m1", 3, "c", "h", ("a",), None, (TopicPartitions("a", (0,)),), (), ())
        offsets = (OffsetLag("a", 0, 5, 9, 4, "m1"), OffsetLag("secret", 0, 1, 1, 0, None))
        return GroupDescription(group_id, "Stable", "consumer", "uniform", 3, 3, None, (member,), offsets)


async def test_a_group_description_needs_its_members_topics_and_hides_other_offsets() -> None:
    acls = Acls(("DESCRIBE", "GROUP", "g1"))
    groups = GroupApis(Groups(), Authorization(acls))  # type: ignore[arg-type]
    ctx = ALICE.for_api("ConsumerGroupDescribe")
    with pytest.raises(KraftError) as error:
        await groups.describe_group(ctx, "g1")
    assert error.value.error_code == "TOPIC_AUTHORIZATION_FAILED" and "[a]" in error.value.message
    acls.allowed.add(("DESCRIBE", "TOPIC", "a"))
    described = await groups.describe_group(ctx, "g1")
    assert [o.topic for o in described.offsets] == ["a"]
    with pytest.raises(KraftError) as error:
        await groups.describe_group(ctx, "g2")
    assert error.value.error_code == "GROUP_AUTHORIZATION_FAILED"
    with pytest.raises(KraftError) as error:
        await GroupApis(None, Authorization()).describe_group(ctx, "g1")
    assert error.value.error_code == "COORDINATOR_NOT_AVAILABLE"


def test_the_acl_apis_need_an_authorizer_and_the_cluster_operation() -> None:
    ctx = ALICE.for_api("DescribeAcls")
    with pytest.raises(KraftError) as error:
        SecurityApis(None, None, Authorization()).describe_acls(ctx, None)  # type: ignore[arg-type]
    assert error.value.error_code == "SECURITY_DISABLED"
    with pytest.raises(KraftError) as error:
        SecurityApis(None, None, Authorization(Acls())).describe_acls(ctx, None)  # type: ignore[arg-type]
    assert error.value.error_code == "CLUSTER_AUTHORIZATION_FAILED"


async def test_the_controller_apis_need_the_cluster_operation_and_a_controller() -> None:
    ctx = ALICE.for_api("DescribeQuorum")
    with pytest.raises(KraftError) as error:
        await ControllerApis(None, Authorization(Acls())).describe_quorum(ctx)
    assert error.value.error_code == "CLUSTER_AUTHORIZATION_FAILED"
    with pytest.raises(KraftError) as error:
        await ControllerApis(None, Authorization(Acls(("DESCRIBE", "CLUSTER", "kafka-cluster")))).describe_quorum(ctx)
    assert error.value.error_code == "NOT_CONTROLLER"


async def test_the_classic_group_apis_need_read_on_the_group() -> None:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Read on the group (Kafka's rule), checked
    before the coordinator is asked; DescribeGroups: Describe on it."""
    from kraft.broker.groups.classic import JoinRequest

    acls = Acls()
    groups = GroupApis(Groups(), Authorization(acls))  # type: ignore[arg-type]
    ctx = ALICE.for_api("JoinGroup")
    calls = [
        lambda: groups.join_group(ctx, "g1", JoinRequest("", None, "consumer", (("range", b""),), 10_000, 10_000)),
        lambda: groups.sync_group(ctx, "g1", "m", None, 1, None, None, {}),
        lambda: groups.classic_heartbeat(ctx, "g1", "m", None, 1),
        lambda: groups.leave_group(ctx, "g1", [("m", None)]),
        lambda: groups.describe_classic(ctx, "g1"),
    ]
    for call in calls:
        with pytest.raises(KraftError) as error:
            await call()
        assert error.value.error_code == "GROUP_AUTHORIZATION_FAILED"

"""The Kafka admin handlers (kraft/kafka/acls.py, client_quotas.py, scram_credentials.py,
controller_apis.py, replica_admin.py) over the real services of kraft/server with fakes below
them (the ACL and user stores, the controller, the replicas): Kafka's wire enums and shapes in,
kio responses of the request's version out, every one encodable; errors where Kafka puts them;
the request's cost charged to the client's request quota and answered as throttle_time_ms."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraft.errors import KraftError
from kraft.kafka.admin_apis import ADMIN_APIS, register_admin_apis
from kraft.kafka.api_versions import ApiVersionsTable
from kraft.kafka.codec import encode_response
from request_metrics_support import RecordedRequests
from kraft.kafka.entities import build
from kraft.kafka import handling
from kraft.kafka.handling import counted
from kraft.metadata.acl import AclBindingFilter, StandardAcl
from kraft.server.authorization import Authorization
from kraft.server.controller_apis import ControllerApis
from kraft.server.quotas import Quotas, TimedAwait
from kraft.server.replica_admin import ActiveProducer, ReplicaAdminApis
from kraft.server.request_context import RequestContext
from kraft.server.security_admin import (
    QuotaDescription, ScramCredentialInfo, ScramResult, UserScramCredentials,
)
from kraft.server.security_apis import SecurityApis
from kraft.server.services import BrokerServices

ALICE = RequestContext("User:alice", "10.0.0.8", "PLAINTEXT", client_id="app")


class Authorizer:
    """Allows what `allowed` lists: (operation, resource type, name)."""

    def __init__(self, *allowed: tuple[str, str, str]) -> None:
        self.allowed = set(allowed)

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> bool:
        return (operation, resource_type, resource_name) in self.allowed

    def denied(self, resource_type: str) -> None:
        pass


class AclStore:
    def __init__(self) -> None:
        self.acls: list[StandardAcl] = []
        self.quotas: dict[tuple[str | None, str | None], dict[str, float]] = {}
        self.quota_calls: list[tuple[list[dict[str, Any]], bool]] = []

    def describe_acls(self, flt: AclBindingFilter) -> list[StandardAcl]:
        return [a for a in self.acls if flt.matches(a)]

    async def create_acls(self, acls: list[StandardAcl]) -> list[StandardAcl]:
        self.acls += acls
        return acls

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[StandardAcl]]:
        out = [[a for a in self.acls if f.matches(a)] for f in filters]
        self.acls = [a for a in self.acls if not any(f.matches(a) for f in filters)]
        return out

    def describe_client_quotas(self) -> list[QuotaDescription]:
        return [QuotaDescription(u, c, q) for (u, c), q in self.quotas.items()]

    async def alter_client_quotas(self, entries: list[dict[str, Any]], validate_only: bool) -> int:
        self.quota_calls.append((entries, validate_only))
        for e in entries:
            if any(op["key"] not in ("producer_byte_rate", "consumer_byte_rate") for op in e["ops"]):
                raise KraftError("INVALID_REQUEST", "unknown quota")
        return len(entries)


class Users:
    def __init__(self) -> None:
        self.users = {"alice": (ScramCredentialInfo("SCRAM-SHA-256", 8192),)}
        self.altered: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def describe(self, user: str | None) -> list[UserScramCredentials]:
        return [UserScramCredentials(n, c) for n, c in self.users.items() if user in (None, n)]

    async def alter(self, upsertions: list[dict[str, Any]], deletions: list[dict[str, Any]]) -> list[ScramResult]:
        self.altered.append((upsertions, deletions))
        return []


class Controller:
    def __init__(self) -> None:
        self.plans: list[list[dict[str, Any]]] = []

    def is_active(self) -> bool:
        return True

    async def describe_quorum(self) -> dict[str, Any]:
        return {"leader_id": 1, "leader_epoch": 4, "high_watermark": 120, "replication": [
            {"node_id": 1, "log_end_offset": 120, "last_fetch_timestamp": 5, "last_caught_up_timestamp": 5,
             "status": "Leader", "lag": 0},
            {"node_id": 2, "log_end_offset": 118, "last_fetch_timestamp": 4, "last_caught_up_timestamp": 3,
             "status": "Follower", "lag": 2},
            {"node_id": 7, "log_end_offset": 110, "last_fetch_timestamp": 4, "last_caught_up_timestamp": 1,
             "status": "Observer", "lag": 10}]}

    async def elect_leaders(self, partitions: Any, request_id: str | None) -> dict[str, Any]:
        return {"partitions": [{"topic": "t", "partition": 0, "leader": 1},
                               {"topic": "t", "partition": 1, "leader": 2, "error_code": "ELECTION_NOT_NEEDED",
                                "message": "already led by its preferred replica"}]}

    async def alter_partition_reassignments(self, plan: list[dict[str, Any]], request_id: str | None) -> dict[str, Any]:
        if any(p["topic"] == "missing" for p in plan):
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", "missing-0 does not exist")
        self.plans.append(plan)
        return {"partitions": []}

    async def list_partition_reassignments(self) -> dict[str, Any]:
        return {"partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1, 2], "adding_replicas": [3],
                                "removing_replicas": [2]},
                               {"topic": "u", "partition": 1, "replicas": [1], "adding_replicas": [1],
                                "removing_replicas": []}]}


class Replicas:
    def local_partitions(self) -> Iterator[tuple[str, int, Any]]:
        class View:
            has_log, size_in_bytes, high_watermark, log_end_offset, log_dir = True, 4096, 10, 12, ""
        yield "t", 0, View()
        yield "u", 3, View()

    async def active_producers(self, topic: str, partition: int) -> list[ActiveProducer]:
        if partition == 9:
            raise KraftError("NOT_LEADER_OR_FOLLOWER", "not the leader")
        return [ActiveProducer(1000, 2, 41, 1_700_000_000_000)]


class Throttle:
    def __init__(self, ms: int) -> None:
        self.ms = ms
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, kind: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        self.recorded.append((kind, principal, client_id))
        return self.ms


class Registry:
    def __init__(self) -> None:
        self.handlers: dict[int, Any] = {}
        self.table = ApiVersionsTable()
        self.services: Any = None

    def register(self, api_key: int, low: int, high: int, handler: Any) -> None:
        self.table.register(api_key, low, high)
        self.handlers[api_key] = counted(self.services, handler)  # as the node's registry does


class Node:
    def __init__(self, *allowed: tuple[str, str, str], authorizer: bool = True, throttle_ms: int = 0,
                 log_dir: str = "/", quotas_configured: bool = True) -> None:
        self.acls, self.users, self.controller = AclStore(), Users(), Controller()
        self.quota = Throttle(throttle_ms)
        self.metrics = RecordedRequests()
        auth = Authorization(Authorizer(*allowed) if authorizer else None)
        services = BrokerServices(
            node=None, metadata=None, authorization=auth, quotas=Quotas(self.quota, configured=lambda: quotas_configured),  # type: ignore[arg-type]
            records=None, topics=None, groups=None, transactions=None,  # type: ignore[arg-type]
            security=SecurityApis(self.acls, self.users, auth), controller=ControllerApis(self.controller, auth),
            replicas=ReplicaAdminApis(Replicas(), [log_dir], auth), metrics=self.metrics)  # type: ignore[arg-type]
        self.registry = Registry()
        self.registry.services = services
        register_admin_apis(self.registry, services)

    async def ask(self, api_key: int, version: int, body: Mapping[str, Any], ctx: RequestContext = ALICE) -> Any:
        request = build(load_request_schema(api_key, version), body)
        ctx = ctx.for_api(type(request).__name__.removesuffix("Request"), version)
        response = await self.registry.handlers[api_key](ctx, request)
        encode_response(7, response)  # every answer is one the client can read
        return response


EVERYTHING = ("ALTER", "CLUSTER", "kafka-cluster"), ("DESCRIBE", "CLUSTER", "kafka-cluster"), \
    ("ALTER_CONFIGS", "CLUSTER", "kafka-cluster"), ("DESCRIBE_CONFIGS", "CLUSTER", "kafka-cluster"), \
    ("READ", "TOPIC", "t")


def creation(name: str, operation: int = 3, permission: int = 2, resource_type: int = 2) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": 3,
            "principal": "User:bob", "host": "*", "operation": operation, "permission_type": permission}


def acl_filter(**overrides: Any) -> dict[str, Any]:
    return {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1, **overrides}


def test_the_admin_apis_register_versions_kio_has() -> None:
    assert {(a.api_key, a.min_version, a.max_version) for a in ADMIN_APIS} >= {(29, 1, 3), (50, 0, 0), (55, 0, 2)}
    assert set(Node().registry.handlers) == {a.api_key for a in ADMIN_APIS}


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_acls_created_described_and_deleted_in_kafkas_enums(version: int) -> None:
    node = Node(*EVERYTHING)
    created = await node.ask(30, version, {"creations": [creation("t"), creation("t", operation=0)]})
    assert [r.error_code for r in created.results] == [ErrorCode.none, ErrorCode.invalid_request]
    assert node.acls.acls == [StandardAcl("TOPIC", "t", "LITERAL", "User:bob", "*", "READ", "DENY")]

    described = await node.ask(29, version, acl_filter(resource_type_filter=2, resource_name_filter="t"))
    [resource] = described.resources
    assert (resource.resource_type, resource.resource_name, resource.pattern_type) == (2, "t", 3)
    assert [(a.principal, a.operation, a.permission_type) for a in resource.acls] == [("User:bob", 3, 2)]

    deleted = await node.ask(31, version, {"filters": [acl_filter(principal_filter="User:bob"),
                                                       acl_filter(operation=0)]})
    assert [[(m.resource_name, m.operation) for m in r.matching_acls] for r in deleted.filter_results] == [[("t", 3)], []]
    assert deleted.filter_results[1].error_code == ErrorCode.invalid_request
    assert node.acls.acls == []


async def test_acl_apis_refuse_without_alter_or_describe_on_the_cluster_and_without_an_authorizer() -> None:
    node = Node()
    described = await node.ask(29, 3, acl_filter())
    assert described.error_code == ErrorCode.cluster_authorization_failed and described.resources == ()
    created = await node.ask(30, 3, {"creations": [creation("t")]})
    assert [r.error_code for r in created.results] == [ErrorCode.cluster_authorization_failed]
    assert node.acls.acls == []
    deleted = await node.ask(31, 3, {"filters": [acl_filter()]})
    assert [r.error_code for r in deleted.filter_results] == [ErrorCode.cluster_authorization_failed]
    assert (await Node(authorizer=False).ask(29, 1, acl_filter())).error_code == ErrorCode.security_disabled


async def test_a_throttled_request_answers_its_throttle_time_and_is_counted() -> None:
    node = Node(*EVERYTHING, throttle_ms=250)
    described = await node.ask(29, 3, acl_filter())
    assert described.throttle_time == datetime.timedelta(milliseconds=250)
    assert node.quota.recorded == [("request", "User:alice", "app")]
    assert node.metrics.observed == [("DescribeAcls", "NONE")]
    refused = Node()
    await refused.ask(29, 3, acl_filter())
    assert refused.metrics.observed == [("DescribeAcls", "CLUSTER_AUTHORIZATION_FAILED")]


async def test_a_request_is_neither_timed_nor_charged_while_no_client_quota_exists(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As the HTTP listener and Kafka's ClientQuotaManager: without any quota nothing is timed
    (a TimedAwait per request, two clock reads per step) or recorded. Counted."""
    timed: list[object] = []

    class Counted(TimedAwait):
        def __init__(self, coro: Any) -> None:
            timed.append(coro)
            super().__init__(coro)

    monkeypatch.setattr(handling, "TimedAwait", Counted)
    node = Node(*EVERYTHING, throttle_ms=250, quotas_configured=False)
    described = await node.ask(29, 3, acl_filter())
    assert described.throttle_time == datetime.timedelta(0)
    assert node.quota.recorded == [] and timed == []
    charged = Node(*EVERYTHING, throttle_ms=250)
    assert (await charged.ask(29, 3, acl_filter())).throttle_time == datetime.timedelta(milliseconds=250)
    assert len(timed) == 1
    assert node.metrics.observed == [("DescribeAcls", "NONE")]


@pytest.mark.parametrize("version", [0, 1])
async def test_client_quotas_by_kafkas_entity_types_with_filters(version: int) -> None:
    node = Node(*EVERYTHING)
    altered = await node.ask(49, version, {"entries": [
        {"entity": [{"entity_type": "user", "entity_name": "bob"}, {"entity_type": "client-id", "entity_name": None}],
         "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False},
                 {"key": "consumer_byte_rate", "value": 0.0, "remove": True}]}], "validate_only": False})
    assert [e.error_code for e in altered.entries] == [ErrorCode.none]
    assert node.acls.quota_calls == [([{"entity": {"user": "bob", "client_id": "<default>"}, "ops": [
        {"key": "producer_byte_rate", "value": 1024.0}, {"key": "consumer_byte_rate", "remove": True}]}], False)]

    bad = await node.ask(49, version, {"entries": [{"entity": [{"entity_type": "user", "entity_name": "bob"}],
                                                    "ops": [{"key": "bogus", "value": 1.0, "remove": False}]}],
                                       "validate_only": True})
    assert [e.error_code for e in bad.entries] == [ErrorCode.invalid_request]

    node.acls.quotas = {("bob", "<default>"): {"producer_byte_rate": 1024.0}, ("bob", None): {"request_percentage": 5.0},
                        ("<default>", None): {"consumer_byte_rate": 2048.0}}
    exact = await node.ask(48, version, {"components": [{"entity_type": "user", "match_type": 0, "match": "bob"}],
                                         "strict": True})
    assert [[(e.entity_type, e.entity_name) for e in entry.entity] for entry in exact.entries] == [[("user", "bob")]]
    assert [(v.key, v.value) for v in exact.entries[0].values] == [("request_percentage", 5.0)]
    default = await node.ask(48, version, {"components": [{"entity_type": "user", "match_type": 1, "match": None}],
                                           "strict": False})
    assert [[(e.entity_type, e.entity_name) for e in entry.entity] for entry in default.entries] == [[("user", None)]]
    ip = await node.ask(48, version, {"components": [{"entity_type": "ip", "match_type": 2, "match": None}],
                                      "strict": False})
    assert ip.error_code == ErrorCode.invalid_request and not ip.entries


async def test_scram_credentials_described_by_mechanism_and_altered_as_the_controller_takes_them() -> None:
    node = Node(*EVERYTHING)
    everyone = await node.ask(50, 0, {"users": None})
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in everyone.results] == \
        [("alice", [(1, 8192)])]
    asked = await node.ask(50, 0, {"users": [{"name": "alice"}, {"name": "nobody"}, {"name": "nobody"}]})
    assert [(r.user, r.error_code) for r in asked.results] == [("alice", ErrorCode.none),
                                                               ("nobody", ErrorCode.duplicate_resource)]
    missing = await node.ask(50, 0, {"users": [{"name": "nobody"}]})
    assert missing.results[0].error_code == ErrorCode.resource_not_found

    altered = await node.ask(51, 0, {"deletions": [{"name": "alice", "mechanism": 1}], "upsertions": [
        {"name": "bob", "mechanism": 2, "iterations": 4096, "salt": b"salt", "salted_password": b"\x01" * 64}]})
    assert [(r.user, r.error_code) for r in altered.results] == [("alice", ErrorCode.none), ("bob", ErrorCode.none)]
    assert node.users.altered == [([{"name": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 4096, "salt": "c2FsdA==",
                                     "salted_password": "AQEB" * 21 + "AQ=="}],
                                   [{"name": "alice", "mechanism": "SCRAM-SHA-256"}])]
    twice = await node.ask(51, 0, {"deletions": [{"name": "bob", "mechanism": 2}], "upsertions": [
        {"name": "bob", "mechanism": 2, "iterations": 4096, "salt": b"s", "salted_password": b"p"}]})
    assert [r.error_code for r in twice.results] == [ErrorCode.duplicate_resource]
    refused = await Node().ask(51, 0, {"deletions": [{"name": "alice", "mechanism": 1}], "upsertions": []})
    assert [r.error_code for r in refused.results] == [ErrorCode.cluster_authorization_failed]


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_describe_quorum_has_kip_595s_shape(version: int) -> None:
    answer = await Node(*EVERYTHING).ask(55, version, {"topics": [
        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]},
        {"topic_name": "other", "partitions": [{"partition_index": 0}]}]})
    quorum, other = answer.topics
    [p] = quorum.partitions
    assert (p.error_code, p.leader_id, p.leader_epoch, p.high_watermark) == (ErrorCode.none, 1, 4, 120)
    assert [(v.replica_id, v.log_end_offset) for v in p.current_voters] == [(1, 120), (2, 118)]
    assert [(o.replica_id, o.log_end_offset) for o in p.observers] == [(7, 110)]
    assert other.partitions[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_elect_leaders_preferred_answers_per_partition_and_refuses_unclean() -> None:
    node = Node(*EVERYTHING)
    answer = await node.ask(43, 2, {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 1]}]})
    [topic] = answer.replica_election_results
    assert [(r.partition_id, r.error_code) for r in topic.partition_result] == \
        [(0, ErrorCode.none), (1, ErrorCode.election_not_needed)]
    unclean = await node.ask(43, 1, {"election_type": 1, "topic_partitions": None})
    assert unclean.error_code == ErrorCode.invalid_request
    refused = await Node().ask(43, 2, {"election_type": 0, "topic_partitions": None})
    assert refused.error_code == ErrorCode.cluster_authorization_failed


async def test_reassignments_altered_all_or_none_and_listed_by_partition() -> None:
    node = Node(*EVERYTHING)
    answer = await node.ask(45, 1, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [3, 1]}, {"partition_index": 1, "replicas": None}]}]})
    assert answer.error_code == ErrorCode.none
    assert node.controller.plans == [[{"topic": "t", "partition": 0, "replicas": [3, 1]},
                                      {"topic": "t", "partition": 1, "replicas": None}]]
    refused_plan = await node.ask(45, 0, {"topics": [{"name": "t", "partitions": [{"partition_index": 0}]},
                                                     {"name": "missing", "partitions": [{"partition_index": 0}]}]})
    assert [p.error_code for t in refused_plan.responses for p in t.partitions] == \
        [ErrorCode.unknown_topic_or_partition] * 2
    listed = await node.ask(46, 0, {"topics": [{"name": "t", "partition_indexes": [0]}]})
    [topic] = listed.topics
    assert (topic.name, [(p.replicas, p.adding_replicas, p.removing_replicas) for p in topic.partitions]) == \
        ("t", [((3, 1, 2), (3,), (2,))])
    assert len((await node.ask(46, 0, {"topics": None})).topics) == 2
    assert (await Node().ask(46, 0, {"topics": None})).error_code == ErrorCode.cluster_authorization_failed


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_describe_log_dirs_names_the_directory_and_its_partitions(version: int, tmp_path: Any) -> None:
    answer = await Node(*EVERYTHING, log_dir=str(tmp_path)).ask(35, version, {"topics": [
        {"topic": "t", "partitions": [0, 1]}]})
    [result] = answer.results
    assert (result.error_code, result.log_dir) == (ErrorCode.none, str(tmp_path))
    assert [(t.name, [(p.partition_index, p.partition_size, p.offset_lag) for p in t.partitions])
            for t in result.topics] == [("t", [(0, 4096, 0)])]
    if version >= 4:
        assert result.total_bytes > 0 and result.usable_bytes >= 0
    refused = await Node(log_dir=str(tmp_path)).ask(35, version, {"topics": None})
    assert refused.results == ()
    if version >= 3:
        assert refused.error_code == ErrorCode.cluster_authorization_failed


async def test_a_log_dir_that_cannot_be_read_is_a_storage_error(tmp_path: Any) -> None:
    answer = await Node(*EVERYTHING, log_dir=str(tmp_path / "gone")).ask(35, 4, {"topics": None})
    assert [r.error_code for r in answer.results] == [ErrorCode.kafka_storage_error]


async def test_describe_producers_answers_each_partition_on_its_own() -> None:
    answer = await Node(*EVERYTHING).ask(61, 0, {"topics": [{"name": "t", "partition_indexes": [0, 9]},
                                                            {"name": "secret", "partition_indexes": [0]}]})
    t, secret = answer.topics
    ok, elsewhere = t.partitions
    assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset)
            for p in ok.active_producers] == [(1000, 2, 41, -1, -1)]
    assert elsewhere.error_code == ErrorCode.not_leader_or_follower
    assert secret.partitions[0].error_code == ErrorCode.topic_authorization_failed


async def test_a_bug_below_a_handler_is_unknown_server_error_not_a_closed_connection() -> None:
    node = Node(*EVERYTHING)

    def broken(flt: AclBindingFilter) -> list[StandardAcl]:
        raise RuntimeError("a bug")

    node.acls.describe_acls = broken  # type: ignore[method-assign]
    answer = await node.ask(29, 3, acl_filter())
    assert answer.error_code == ErrorCode.unknown_server_error and answer.resources == ()


async def test_describe_log_dirs_answers_an_offline_directory_storage_error(tmp_path: Path) -> None:
    """JBOD (KIP-858): a directory whose disk failed answers KAFKA_STORAGE_ERROR and no partitions;
    the partitions are those of the directory holding them."""
    a_dir, b_dir = str(tmp_path / "a"), str(tmp_path / "b")
    (tmp_path / "a").mkdir()
    class Views:
        def local_partitions(self) -> Iterator[tuple[str, int, Any]]:
            class View:
                has_log, size_in_bytes, high_watermark, log_end_offset = True, 10, 5, 5

                def __init__(self, log_dir: str) -> None:
                    self.log_dir = log_dir
            yield "t", 0, View(a_dir)
            yield "t", 1, View(b_dir)

    auth = Authorization(None)
    apis = ReplicaAdminApis(Views(), [a_dir, b_dir], auth, lambda: {b_dir})  # type: ignore[arg-type]
    a, b = await apis.describe_log_dirs(ALICE, None)
    assert (a.path, a.error, [p.partition for p in a.partitions]) == (a_dir, None, [0])
    assert (b.path, b.error.error_code if b.error else None, b.partitions) == (b_dir, "KAFKA_STORAGE_ERROR", ())

"""Fields of the wrong JSON type in the admin routes (SCRAM credentials, ACLs, client quotas, topic
configs, group offset deletion, reassignments), on the public routes and the controller's own:
a dict or list where a string or number belongs, a bool for an int, integers beyond any int64 or
float, negative numbers. Each gets a 400 with a Kafka error name and a message, never a 500, and
nothing stored changes: not the users, ACLs, quotas, configs, group offsets or reassignments, and
not the metadata log (its offset stays where it was)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from kraft.security.scram import scram_upsertion
from harness import NodeProcess, start_node, wait_for
from security_support import node_request

SECRET = "bad-admin-input-secret"
TOPIC = "guarded"
GROUP = "guarded-group"
HUGE = 10**40  # beyond int64 (msgpack cannot carry it) and a float's integer precision
VAST = 10**400  # beyond any float
GOOD_UPSERT = scram_upsertion("carol", "SCRAM-SHA-256", "pw")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A node with the StandardAuthorizer (so the ACL routes serve) and seeded state of every kind;
    requests are signed as the cluster's node 1, which the authorizer always allows."""
    n = start_node(tmp_path_factory.mktemp("admin-bad-input"), **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "controller.quorum.secret": SECRET,
    })
    try:
        wait_for(n.ready, 60, what="node ready")
        call(n, "POST", "/v1/topics", {"name": TOPIC, "configs": {"retention.ms": "3600000"}}, expect=201)
        call(n, "POST", "/v1/users/scram-credentials",
             {"upsertions": [scram_upsertion("alice", "SCRAM-SHA-256", "pw")]})
        call(n, "POST", "/v1/acls", {"acls": [{
            "resource_type": "TOPIC", "resource_name": TOPIC, "pattern_type": "LITERAL", "principal": "User:alice",
            "host": "*", "operation": "READ", "permission_type": "ALLOW"}]}, expect=201)
        call(n, "POST", "/v1/client-quotas", {"entries": [{"entity": {"user": "alice"},
                                                           "ops": [{"key": "producer_byte_rate", "value": 1024}]}]})
        wait_for(lambda: call(n, "POST", f"/v1/groups/{GROUP}/offsets", {
            "offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]}, expect=None)[0] == 200, 60,
            what="an offset committed")
        yield n
    finally:
        n.stop()


def call(node: NodeProcess, method: str, path: str, body: Any = None, expect: int | None = 200) -> Any:
    """A JSON request signed as node 1 (JSON, so integers beyond int64 can be sent): the answer's
    body, or (status, body) when `expect` is None."""
    response = node_request(node.url, SECRET, 1, method, path, body, as_json=True)
    answer = response.json()
    if expect is None:
        return response.status_code, answer
    assert response.status_code == expect, (method, path, response.status_code, answer)
    return answer


def stored(node: NodeProcess) -> dict[str, Any]:
    return {
        "metadata_offset": call(node, "GET", "/v1/health")["metadata_offset"],
        "users": call(node, "GET", "/v1/users/scram-credentials")["users"],
        "acls": call(node, "GET", "/v1/acls")["acls"],
        "quotas": call(node, "GET", "/v1/client-quotas")["entries"],
        "configs": call(node, "GET", f"/v1/topics/{TOPIC}/configs")["configs"],
        "offsets": call(node, "GET", f"/v1/groups/{GROUP}/offsets"),
        "reassignments": call(node, "GET", "/v1/controller/reassignments")["partitions"],
    }


def scram(*, upsertions: list[Any] = (), deletions: list[Any] = ()) -> dict[str, Any]:
    return {"upsertions": list(upsertions), "deletions": list(deletions), "request_id": "0"}


def quota(op: dict[str, Any], entity: Any = None) -> dict[str, Any]:
    return {"entries": [{"entity": {"user": "alice"} if entity is None else entity, "ops": [op]}]}


def binding(**fields: Any) -> dict[str, Any]:
    return {"resource_type": "TOPIC", "resource_name": TOPIC, "pattern_type": "LITERAL", "principal": "User:bob",
            "host": "*", "operation": "READ", "permission_type": "ALLOW", **fields}


SCRAM_BODIES = [
    scram(deletions=[{"name": "0", "mechanism": {}}]),  # the fuzzer's: hashed into a dict lookup
    scram(deletions=[{"name": "alice", "mechanism": ["SCRAM-SHA-256"]}]),
    scram(deletions=[{"name": {}, "mechanism": "SCRAM-SHA-256"}]),
    scram(deletions=[["alice", "SCRAM-SHA-256"]]),
    scram(upsertions=[{**GOOD_UPSERT, "mechanism": {}}]),
    scram(upsertions=[{**GOOD_UPSERT, "name": ["carol"]}]),
    scram(upsertions=[{**GOOD_UPSERT, "iterations": True}]),
    scram(upsertions=[{**GOOD_UPSERT, "iterations": -4096}]),
    scram(upsertions=[{**GOOD_UPSERT, "iterations": HUGE}]),
    scram(upsertions=[{**GOOD_UPSERT, "iterations": "4096"}]),
    scram(upsertions=[{**GOOD_UPSERT, "salt": {"b64": GOOD_UPSERT["salt"]}}]),
    scram(upsertions=[{**GOOD_UPSERT, "salted_password": None}]),
    scram(upsertions=[{**GOOD_UPSERT, "salted_password": 12345}]),
    {"upsertions": {}, "deletions": []},
]
QUOTA_BODIES = [
    quota({"key": "producer_byte_rate", "value": VAST}),
    quota({"key": "producer_byte_rate", "value": -VAST}),
    quota({"key": "producer_byte_rate", "value": HUGE * 10**300}),
    quota({"key": "producer_byte_rate", "value": -1}),
    quota({"key": "producer_byte_rate", "value": True}),
    quota({"key": "producer_byte_rate", "value": "2048"}),
    quota({"key": "producer_byte_rate", "value": {"n": 1}}),
    quota({"key": {}, "value": 1}),
    quota({"key": ["producer_byte_rate"], "remove": True}),
    quota({"key": "producer_byte_rate", "remove": {}}),
    quota({"key": "producer_byte_rate", "remove": "no", "value": 5}),  # a truthy string must not remove
    quota({"key": "producer_byte_rate", "remove": 1}),
    quota({"key": "producer_byte_rate", "value": 1}, entity={"user": {}}),
    quota({"key": "producer_byte_rate", "value": 1}, entity={"user": ["alice"], "client_id": None}),
    quota({"key": "producer_byte_rate", "value": 1}, entity=[]),
    {"entries": [{"entity": {"user": "alice"}, "ops": {"key": "producer_byte_rate"}}]},
]
ACL_BODIES = [
    {"acls": [binding(resource_type={})]},
    {"acls": [binding(operation=["READ"])]},
    {"acls": [binding(resource_name=HUGE)]},
    {"acls": [binding(host=True)]},
    {"acls": [[TOPIC]]},
]
ACL_FILTER_BODIES = [
    {"filters": [{"resource_type": {}}]},
    {"filters": [{"resource_name": HUGE}]},
    {"filters": [{"principal": ["User:alice"]}]},
    {"filters": [{"permission_type": False}]},
    {"filters": ["TOPIC"]},
]
CONFIG_BODIES = [
    {"configs": {"retention.ms": {}}},
    {"configs": {"retention.ms": [1]}},
    {"configs": {"retention.ms": HUGE}},
    {"configs": {"retention.ms": -VAST}},
    {"configs": {"min.insync.replicas": -1}},
    {"configs": ["retention.ms"]},
]
OFFSET_DELETE_BODIES = [
    {"topics": [{"topic": {}, "partitions": [0]}]},
    {"topics": [{"topic": TOPIC, "partitions": [HUGE]}]},
    {"topics": [{"topic": TOPIC, "partitions": [True]}]},
    {"topics": [{"topic": TOPIC, "partitions": [-1]}]},
    {"topics": [{"topic": TOPIC, "partitions": {"0": 0}}]},
    {"topics": [TOPIC]},
]
REASSIGNMENT_BODIES = [
    {"partitions": [{"topic": TOPIC, "partition": HUGE, "replicas": [1]}]},
    {"partitions": [{"topic": TOPIC, "partition": True, "replicas": [1]}]},
    {"partitions": [{"topic": TOPIC, "partition": 0, "replicas": [True]}]},
    {"partitions": [{"topic": TOPIC, "partition": 0, "replicas": [HUGE]}]},
    {"partitions": [{"topic": TOPIC, "partition": 0, "replicas": [-1]}]},
    {"partitions": [{"topic": TOPIC, "partition": 0, "replicas": {"1": 1}}]},
    {"partitions": [{"topic": {}, "partition": 0, "replicas": None}]},
]

CASES = (
    [("POST", "/v1/users/scram-credentials", b) for b in SCRAM_BODIES]
    + [("POST", "/v1/controller/users/scram-credentials", b) for b in SCRAM_BODIES]
    + [("POST", "/v1/client-quotas", b) for b in QUOTA_BODIES]
    + [("POST", "/v1/controller/client-quotas", b) for b in QUOTA_BODIES]
    + [("POST", "/v1/acls", b) for b in ACL_BODIES]
    + [("POST", "/v1/controller/acls", b) for b in ACL_BODIES]
    + [("POST", "/v1/acls/delete", b) for b in ACL_FILTER_BODIES]
    + [("POST", "/v1/controller/acls/delete", b) for b in ACL_FILTER_BODIES]
    + [("PATCH", f"/v1/topics/{TOPIC}/configs", b) for b in CONFIG_BODIES]
    + [("POST", "/v1/controller/configs", {"resource_name": TOPIC, **b}) for b in CONFIG_BODIES]
    + [("POST", f"/v1/groups/{GROUP}/offsets/delete", b) for b in OFFSET_DELETE_BODIES]
    + [("POST", "/v1/controller/reassignments", b) for b in REASSIGNMENT_BODIES]
)


def test_wrongly_typed_fields_are_refused_and_change_nothing(node):
    before = stored(node)
    assert before["users"] and before["acls"] and before["quotas"] and before["offsets"]["offsets"], before
    failures = []
    for method, path, body in CASES:
        status, answer = call(node, method, path, body, expect=None)
        ok = (status == 400 and isinstance(answer.get("error_code"), str) and answer["error_code"].isupper()
              and isinstance(answer.get("message"), str) and answer["message"])
        if not ok:
            failures.append((method, path, body, status, answer))
    assert not failures, "\n".join(map(repr, failures))
    assert stored(node) == before


def test_msgpack_bodies_of_the_wrong_type_are_refused_too(node):
    """What a node forwards travels as msgpack: a wrongly typed field there is the same 400."""
    before = stored(node)
    for path, body in [("/v1/controller/users/scram-credentials", scram(deletions=[{"name": "0", "mechanism": {}}])),
                       ("/v1/controller/client-quotas", quota({"key": "producer_byte_rate", "remove": "yes"})),
                       ("/v1/controller/acls", {"acls": [binding(resource_type=[1])]})]:
        response = node_request(node.url, SECRET, 1, "POST", path, body)
        answer = msgpack.unpackb(response.content)
        assert response.status_code == 400 and answer["error_code"] and answer["message"], (path, answer)
    assert stored(node) == before


def test_well_typed_bodies_still_work(node):
    """The checks refuse types, not valid requests: the same routes with good bodies change state."""
    call(node, "POST", "/v1/users/scram-credentials", {"upsertions": [GOOD_UPSERT]})
    assert {u["name"] for u in call(node, "GET", "/v1/users/scram-credentials")["users"]} == {"alice", "carol"}
    call(node, "POST", "/v1/users/scram-credentials", {"deletions": [{"name": "carol", "mechanism": "SCRAM-SHA-256"}]})
    call(node, "POST", "/v1/client-quotas", quota({"key": "request_percentage", "value": 12.5}))
    call(node, "POST", "/v1/client-quotas", quota({"key": "request_percentage", "remove": True}))
    assert call(node, "GET", "/v1/client-quotas")["entries"] == [
        {"user": "alice", "client_id": None, "quotas": {"producer_byte_rate": 1024.0}}]
    created = call(node, "POST", "/v1/acls", {"acls": [binding(operation="Describe")]}, expect=201)["created"]
    assert created == [binding(operation="DESCRIBE")]
    deleted = call(node, "POST", "/v1/acls/delete", {"filters": [{"principal": "User:bob"}]})
    assert [len(r["matching_acls"]) for r in deleted["filter_results"]] == [1]

"""Admin requests sent to a node that is not the active controller (issue 21 item 11), on a
secured 3-node cluster (SASL_PLAINTEXT, StandardAuthorizer, super.users=User:admin): the super
user's create topic, alter config, ACL, SCRAM, quorum, election and reassignment calls all succeed
there (the quorum, election and reassignment ones answered 421 NOT_CONTROLLER before: they are
now forwarded to the active controller with the client's principal, KIP-590), and mallory, who may
only read one topic, is refused each of them with 403 and changes nothing. The controller, not
the forwarding node, decides a forwarded request, as the client: its audit log names mallory.
The tests share one cluster and run in file order (the refusals first, on the untouched state)."""

from __future__ import annotations

import pytest
import requests

from kraft.api.client import Admin
from harness import free_port, shutdown_all, wait_for
from security_support import SecureNode, start_all

SECRET = "acl-forwarding-cluster-secret"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN = ("admin", "admin-secret-0xB8")
MALLORY = ("mallory", "mallory-secret-0xC9")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("acl-forwarding")
    raft = {i: free_port() for i in (1, 2, 3)}
    quorum = ",".join(f"{i}@127.0.0.1:{p}" for i, p in raft.items())
    nodes = [SecureNode(node_id=i, data_dir=root / f"data-{i}", controller_port=raft[i], quorum=quorum, auth=ADMIN,
                        overrides={"controller.quorum.secret": SECRET, "security.protocol": "SASL_PLAINTEXT",
                                   "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
                                   "authorizer.class.name": AUTHORIZER, "super.users": "User:admin"},
                        args=["--add-scram", f"SCRAM-SHA-256=[name={ADMIN[0]},password={ADMIN[1]}]"])
             for i in (1, 2, 3)]
    try:
        start_all(nodes)
        with admin_client(nodes[0], ADMIN) as admin:
            admin.alter_user_scram_credentials(upsertions=[("mallory", "SCRAM-SHA-256", MALLORY[1], 4096)])
            admin.create_topic("orders", 1, 1)
            admin.create_acls([acl("TOPIC", "orders", "READ")])
        yield nodes
    finally:
        shutdown_all(nodes)


def acl(resource_type: str, name: str, operation: str) -> dict[str, str]:
    return {"resource_type": resource_type, "resource_name": name, "pattern_type": "LITERAL",
            "principal": "User:mallory", "host": "*", "operation": operation, "permission_type": "ALLOW"}


def admin_client(node: SecureNode, auth: tuple[str, str]) -> Admin:
    return Admin(node.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                 sasl_plain_username=auth[0], sasl_plain_password=auth[1])


def as_user(node: SecureNode, auth: tuple[str, str]) -> requests.Session:
    s = node.session()
    s.auth = auth
    return s


def active_and_other(nodes: list[SecureNode]) -> tuple[SecureNode, SecureNode]:
    active_id = wait_for(lambda: next((n.node_id for n in nodes if n.health().get("active_controller")), None), 30,
                         what="an active controller")
    active = next(n for n in nodes if n.node_id == active_id)
    wait_for(lambda: all(n.health().get("controller_id") == active_id for n in nodes), 30,
             what="every node knowing the active controller")
    return active, next(n for n in nodes if n.node_id != active_id)


def replicas_of_orders(node: SecureNode) -> list[int]:
    [topic] = as_user(node, ADMIN).get(f"{node.url}/v1/metadata", params={"topics": "orders"},
                                       timeout=10).json()["topics"]
    return topic["partitions"][0]["replicas"]


def calls(nodes: list[SecureNode]) -> list[tuple[str, str, object, str]]:
    """(method, path, body, the error code a principal without the permission gets)."""
    [replica] = replicas_of_orders(nodes[0])
    target = next(n.node_id for n in nodes if n.node_id != replica)
    return [
        ("POST", "/v1/topics", {"name": "new-topic", "partitions": 1, "replication_factor": 1},
         "TOPIC_AUTHORIZATION_FAILED"),
        ("PATCH", "/v1/topics/orders/configs", {"configs": {"retention.ms": "86400000"}}, "TOPIC_AUTHORIZATION_FAILED"),
        ("POST", "/v1/acls", {"acls": [acl("TOPIC", "orders", "WRITE")]}, "CLUSTER_AUTHORIZATION_FAILED"),
        ("POST", "/v1/users/scram-credentials", {"upsertions": [], "deletions": []}, "CLUSTER_AUTHORIZATION_FAILED"),
        ("GET", "/v1/controller/quorum", None, "CLUSTER_AUTHORIZATION_FAILED"),
        ("GET", "/v1/controller/reassignments", None, "CLUSTER_AUTHORIZATION_FAILED"),
        ("POST", "/v1/controller/elect-leaders", {"partitions": [["orders", 0]]}, "CLUSTER_AUTHORIZATION_FAILED"),
        ("POST", "/v1/controller/reassignments", {"partitions": [{"topic": "orders", "partition": 0,
                                                                   "replicas": [target]}]},
         "CLUSTER_AUTHORIZATION_FAILED"),
    ]


def test_a_principal_without_the_permission_is_refused_by_a_node_that_is_not_the_controller(cluster):
    active, other = active_and_other(cluster)
    mallory = as_user(other, MALLORY)
    before = replicas_of_orders(other)
    for method, path, body, code in calls(cluster):
        refused = mallory.request(method, other.url + path, json=body, timeout=30)
        assert (refused.status_code, refused.json()["error_code"]) == (403, code), (method, path, refused.text)
    admin = as_user(other, ADMIN)  # nothing changed
    assert "new-topic" not in {t["name"] for t in admin.get(f"{other.url}/v1/topics", timeout=10).json()["topics"]}
    assert admin.get(f"{other.url}/v1/topics/orders/configs", timeout=10).json()["configs"] == {}
    assert len(admin.get(f"{other.url}/v1/acls", timeout=10).json()["acls"]) == 1
    assert replicas_of_orders(other) == before
    # the controller decided the forwarded quorum request, as mallory from mallory's address
    denial = ("Principal = User:mallory is Denied operation = Describe from host = 127.0.0.1 on resource = "
              "Cluster:LITERAL:kafka-cluster for request = DescribeQuorum")
    assert denial in active.log_path.read_text() and denial not in other.log_path.read_text()


def test_the_super_user_is_served_by_a_node_that_is_not_the_controller(cluster):
    active, other = active_and_other(cluster)
    admin = as_user(other, ADMIN)
    for method, path, body, _ in calls(cluster):
        answer = admin.request(method, other.url + path, json=body, timeout=30)
        assert answer.status_code in (200, 201), (method, path, answer.text)
        if path == "/v1/controller/quorum":
            assert answer.json()["leader_id"] == active.node_id
    with admin_client(other, ADMIN) as client:  # the admin client needs no NOT_CONTROLLER chase either
        assert client.describe_quorum()["leader_id"] == active.node_id
        assert client.describe_configs("orders").configs == {"retention.ms": "86400000"}
        assert len(client.describe_acls()) == 2

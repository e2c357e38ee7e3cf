"""ACLs with real principals on the issue's secured node (SASL_SSL, StandardAuthorizer,
super.users=User:admin, --add-scram for the first user): bob, without Write, is refused with 403
and writes nothing; alice, with Write, produces; the super user needs no ACL; each principal's
metadata shows only what it may describe."""

from __future__ import annotations

import pytest

from kraft.api.client import Admin, KraftError, Producer
from harness import shutdown_all, wait_for
from security_support import SecureNode, make_certs, tls_overrides

ADMIN = ("admin", "admin-secret-0xC3")
ALICE = ("alice", "alice-secret-0xD4")
BOB = ("bob", "bob-secret-0xE5")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = tmp_path_factory.mktemp("acl-sasl")
    certs_dir = make_certs(root / "certs", [1])
    n = SecureNode(node_id=1, data_dir=root / "data-1", ca=certs_dir / "ca.pem", auth=ADMIN,
                   overrides=tls_overrides(certs_dir, 1, "SASL_SSL", **{
                       "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN", "authorizer.class.name": AUTHORIZER,
                       "super.users": "User:admin"}),
                   args=["--add-scram", f"SCRAM-SHA-256=[name={ADMIN[0]},password={ADMIN[1]}]"])
    try:
        n.start()
        n.wait_ready(30)  # its broker unfenced: a topic created before fails with INVALID_REPLICATION_FACTOR
        wait_for(lambda: n.session().get(f"{n.url}/v1/metadata", timeout=5).status_code == 200, 30,
                 what="the admin credential in the metadata log")
        with client(n, Admin, ADMIN) as admin:
            admin.alter_user_scram_credentials(upsertions=[(user, "SCRAM-SHA-256", password, 4096)
                                                           for user, password in (ALICE, BOB)])
            admin.create_topic("orders", 1, 1)
            admin.create_acls([{"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
                                "principal": "User:alice", "host": "*", "operation": "WRITE",
                                "permission_type": "ALLOW"}])
        yield n
    finally:
        shutdown_all([n])


def client(node: SecureNode, cls, auth: tuple[str, str], **extra):
    return cls(f"localhost:{node.port}", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
               sasl_plain_username=auth[0], sasl_plain_password=auth[1], ssl_cafile=str(node.ca), **extra)


def as_user(node: SecureNode, auth: tuple[str, str]):
    s = node.session()
    s.auth = auth
    return s


def high_watermark(node: SecureNode) -> int:
    return as_user(node, ADMIN).get(f"{node.url}/v1/topics/orders/partitions/0/offsets",
                                    timeout=10).json()["high_watermark"]


def test_a_principal_without_write_is_refused_and_writes_nothing(node):
    answer = as_user(node, BOB).post(f"{node.url}/v1/topics/orders/records", json={"records": [{"value": "b"}]},
                                     timeout=30)
    assert answer.status_code == 403 and answer.json()["error_code"] == "TOPIC_AUTHORIZATION_FAILED", answer.text
    with client(node, Producer, BOB, retries=0) as producer:
        with pytest.raises(KraftError) as e:
            producer.send("orders", value=b"b", partition=0).result(timeout=30)
    assert e.value.error_code == "TOPIC_AUTHORIZATION_FAILED"
    assert high_watermark(node) == 0


def test_a_principal_with_write_produces(node):
    before = high_watermark(node)
    with client(node, Producer, ALICE) as producer:
        producer.send("orders", value=b"a", partition=0).result(timeout=30)
    assert high_watermark(node) == before + 1


def test_metadata_per_principal(node):
    names = lambda auth: {t["name"] for t in as_user(node, auth).get(  # noqa: E731
        f"{node.url}/v1/metadata", timeout=10).json()["topics"]}
    assert "orders" in names(ALICE) and "orders" in names(ADMIN)
    assert "orders" not in names(BOB)
    refused = as_user(node, BOB).post(f"{node.url}/v1/acls", json={"acls": []}, timeout=10)
    assert refused.status_code == 403 and refused.json()["error_code"] == "CLUSTER_AUTHORIZATION_FAILED"

"""ACLs with real principals on the issue's secured node (SASL_SSL, StandardAuthorizer,
super.users=User:admin, --add-scram for the first user): bob, without Write, is refused with 403
and writes nothing; alice, with Write, produces; the super user needs no ACL; each principal's
metadata shows only what it may describe. Issue 21: mallory, who may only read one topic, can
neither reset the super user's password nor use any credential, ACL, quota or config route (the
access table walked), nor scrape `/metrics`, which prom, with Describe on the cluster, may. A
principal with Write on a topic but not on alice's transactional id cannot append to her open
transaction over HTTP by naming her producer id and epoch."""

from __future__ import annotations

import base64
import time

import msgpack
import pytest

from kraft.api.access import ACCESS
from kraft.server.authorization import ERROR_CODES
from kraft.api.client import Admin, KraftError, Producer
from kraft.log.batch import build_batch
from harness import shutdown_all, wait_for
from security_support import SecureNode, make_certs, tls_overrides

ADMIN = ("admin", "admin-secret-0xC3")
ALICE = ("alice", "alice-secret-0xD4")
BOB = ("bob", "bob-secret-0xE5")
MALLORY = ("mallory", "mallory-secret-0xF6")  # Read on `orders` (Write on `ledger` from the last test)
PROM = ("prom", "prom-secret-0xA7")  # Prometheus: Describe on the cluster
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
                                                           for user, password in (ALICE, BOB, MALLORY, PROM)])
            admin.create_topic("orders", 1, 1)
            admin.create_topic("payroll", 1, 1)
            admin.create_acls([binding("TOPIC", "orders", "User:alice", "WRITE"),
                               binding("TOPIC", "orders", "User:mallory", "READ"),
                               binding("CLUSTER", "kafka-cluster", "User:prom", "DESCRIBE")])
        yield n
    finally:
        shutdown_all([n])


def binding(resource_type: str, name: str, principal: str, operation: str) -> dict[str, str]:
    return {"resource_type": resource_type, "resource_name": name, "pattern_type": "LITERAL",
            "principal": principal, "host": "*", "operation": operation, "permission_type": "ALLOW"}


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


def test_a_reader_cannot_take_over_the_super_users_credential(node):
    """The issue's reproduction: a user allowed only to read one topic reset admin's password
    (200), then logged in as the super user. AlterUserScramCredentials needs Alter on the cluster,
    DescribeUserScramCredentials Describe, as in Kafka."""
    with client(node, Admin, MALLORY) as mallory:
        with pytest.raises(KraftError) as e:
            mallory.alter_user_scram_credentials(upsertions=[("admin", "SCRAM-SHA-256", "taken-over", 4096)])
        assert e.value.error_code == "CLUSTER_AUTHORIZATION_FAILED"
        with pytest.raises(KraftError) as e:
            mallory.describe_user_scram_credentials()
        assert e.value.error_code == "CLUSTER_AUTHORIZATION_FAILED"
    assert as_user(node, ("admin", "taken-over")).get(f"{node.url}/v1/metadata", timeout=10).status_code == 401
    with client(node, Admin, ADMIN) as admin:  # the real admin keeps the cluster
        assert set(admin.describe_user_scram_credentials()) >= {"admin", "mallory"}


# What the super user sends to each credential, ACL, quota and config route of the access table
# (a new such route fails the walk below until it is added here).
TOPIC_CONFIGS = "/v1/topics/{topic}/configs"
PROBE_ACL = binding("TOPIC", "payroll", "User:mallory", "READ")
ADMIN_CALLS = {
    ("GET", "/v1/users/scram-credentials"): None,
    ("POST", "/v1/users/scram-credentials"): {"upsertions": [], "deletions": []},
    ("GET", "/v1/acls"): None,
    ("POST", "/v1/acls"): {"acls": [PROBE_ACL]},
    ("POST", "/v1/acls/delete"): {"filters": [PROBE_ACL]},
    ("GET", "/v1/client-quotas"): None,
    ("POST", "/v1/client-quotas"): {"entries": [{"entity": {"user": "mallory", "client_id": None},
                                                 "ops": [{"key": "producer_byte_rate", "value": 1024}]}]},
    ("GET", TOPIC_CONFIGS): None,
    ("PATCH", TOPIC_CONFIGS): {"configs": {"retention.ms": "86400000"}},
}


def admin_routes() -> set[tuple[str, str]]:
    return {(method, route) for method, route in ACCESS
            if route.startswith(("/v1/users/", "/v1/acls", "/v1/client-quotas")) or route == TOPIC_CONFIGS}


def test_every_credential_acl_quota_and_config_route_refuses_a_reader(node):
    assert admin_routes() == set(ADMIN_CALLS)
    mallory, admin = as_user(node, MALLORY), as_user(node, ADMIN)
    for (method, route), body in ADMIN_CALLS.items():
        url = node.url + route.replace("{topic}", "payroll")
        refused = mallory.request(method, url, json=body, timeout=30)
        expected = ERROR_CODES[ACCESS[(method, route)].rules[0].resource_type]
        assert (refused.status_code, refused.json()["error_code"]) == (403, expected), (method, route, refused.text)
    # nothing changed
    assert PROBE_ACL not in admin.get(f"{node.url}/v1/acls", timeout=10).json()["acls"]
    assert all(e["user"] != "mallory" for e in admin.get(f"{node.url}/v1/client-quotas", timeout=10).json()["entries"])
    assert "retention.ms" not in admin.get(f"{node.url}/v1/topics/payroll/configs", timeout=10).json()["configs"]
    for (method, route), body in ADMIN_CALLS.items():  # the super user is still allowed everything
        url = node.url + route.replace("{topic}", "payroll")
        answer = admin.request(method, url, json=body, timeout=30)
        assert answer.status_code in (200, 201), (method, route, answer.text)


def test_metrics_need_describe_on_the_cluster(node):
    """`/metrics` names every topic (issue 21 item 2): a principal without Describe on the cluster
    is refused; one with it (Prometheus' user) gets every series."""
    refused = as_user(node, MALLORY).get(f"{node.url}/metrics", timeout=30)
    assert refused.status_code == 403 and refused.json()["error_code"] == "CLUSTER_AUTHORIZATION_FAILED"
    assert "payroll" not in refused.text
    served = as_user(node, PROM).get(f"{node.url}/metrics", timeout=30)
    assert served.status_code == 200, served.text
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="payroll"}' in served.text


LEDGER, LEDGER_TXN = "ledger", "ledger-writer"


def ledger_offsets(node: SecureNode) -> dict:
    return as_user(node, ADMIN).get(f"{node.url}/v1/topics/{LEDGER}/partitions/0/offsets", timeout=10).json()


def committed_values(node: SecureNode) -> list[str]:
    page = as_user(node, ADMIN).get(f"{node.url}/v1/topics/{LEDGER}/partitions/0/records", timeout=10,
                                    params={"offset": "0", "isolation_level": "read_committed"}).json()
    return [r["value"] for r in page["records"]]


def test_a_topic_writer_cannot_append_to_another_producers_transaction(node):
    """The review's reproduction: mallory, with Write on `ledger` but not on alice's transactional
    id, sent `POST /v1/produce` a transactional batch naming alice's producer id and epoch while
    her transaction was open, and it was appended into it (KIP-890's verification passed: alice's
    producer had added the partition). As Kafka's handleProduceRequest: transactional batches
    need the request's transactional id, with Write on it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    and nothing is written; alice's transaction commits her records only."""
    with client(node, Admin, ADMIN) as admin:
        admin.create_topic(LEDGER, 1, 1)
        admin.create_acls([binding("TOPIC", LEDGER, "User:alice", "WRITE"),
                           binding("TRANSACTIONAL_ID", LEDGER_TXN, "User:alice", "WRITE"),
                           binding("TOPIC", LEDGER, "User:mallory", "WRITE")])
    with client(node, Producer, ALICE, transactional_id=LEDGER_TXN) as alice:
        alice.init_transactions()
        alice.begin_transaction()
        alice.send(LEDGER, value=b"alice-1", partition=0).result(timeout=30)
        [state] = as_user(node, ADMIN).get(f"{node.url}/v1/topics/{LEDGER}/partitions/0/producers",
                                           timeout=10).json()["producers"]
        forged = build_batch([(None, b"mallory", (), int(time.time() * 1000))], producer_id=state["producer_id"],
                             producer_epoch=state["producer_epoch"], base_sequence=state["last_sequence"] + 1,
                             transactional=True)
        before = ledger_offsets(node)["log_end_offset"]
        mallory = as_user(node, MALLORY)
        partitions = [{"topic": LEDGER, "partition": 0, "records": forged}]
        # without a transactional id (msgpack), and naming alice's (JSON, base64 batches)
        without = mallory.post(f"{node.url}/v1/produce", data=msgpack.packb({"partitions": partitions}), timeout=30,
                               headers={"Content-Type": "application/msgpack"})
        named = mallory.post(f"{node.url}/v1/produce", timeout=30, json={"transactional_id": LEDGER_TXN, "partitions": [
            {**p, "records": base64.b64encode(p["records"]).decode()} for p in partitions]})
        for answer in (without, named):  # answered in JSON (no Accept)
            refused = (answer.status_code, answer.json().get("error_code"))
            assert refused == (403, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"), answer.text
        assert ledger_offsets(node)["log_end_offset"] == before
        alice.send(LEDGER, value=b"alice-2", partition=0).result(timeout=30)
        alice.commit_transaction()
    assert wait_for(lambda: committed_values(node) == ["alice-1", "alice-2"], 30, what="alice's commit")

"""Kafka clients on a SASL_SSL node with SCRAM (issue 23): confluent-kafka and kafka-python, with
SCRAM-SHA-256 and SCRAM-SHA-512 and the test's CA, produce and consume through the node's client
port; a wrong password is the client's authentication error; a principal the ACLs do not allow to
write sees TOPIC_AUTHORIZATION_FAILED and writes nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest

from harness import shutdown_all, wait_for
from kafka_wire import kafka_python_connect
from security_support import SecureNode, make_certs, tls_overrides

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

ADMIN = ("admin", "admin-secret-0xC3")
ALICE = ("alice", "alice-secret-0xD4")  # Read, Write and Describe on `orders`
BOB = ("bob", "bob-secret-0xE5")  # Describe on `orders` only (and Read on groups, as alice)
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = tmp_path_factory.mktemp("kafka-sasl-ssl")
    certs_dir = make_certs(root / "certs", [1])
    n = SecureNode(node_id=1, data_dir=root / "data-1", ca=certs_dir / "ca.pem", auth=ADMIN,
                   overrides=tls_overrides(certs_dir, 1, "SASL_SSL", **{
                       "sasl.enabled.mechanisms": ",".join(MECHANISMS), "authorizer.class.name": AUTHORIZER,
                       "super.users": "User:admin"}),
                   args=["--add-scram", f"SCRAM-SHA-512=[name={ADMIN[0]},password={ADMIN[1]}]"])
    try:
        n.start()
        n.wait_ready(30)
        wait_for(lambda: n.session().get(f"{n.url}/v1/metadata", timeout=5).status_code == 200, 30,
                 what="the admin credential in the metadata log")
        admin = AdminClient(confluent_config(n, ADMIN, "SCRAM-SHA-512"))
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")),
                                                                           4096), password.encode())
                   for user, password in (ALICE, BOB) for m in MECHANISMS]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
        acls = [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, principal, "*", operation,
                           AclPermissionType.ALLOW)
                for principal, operation in (("User:alice", AclOperation.WRITE), ("User:alice", AclOperation.READ),
                                             ("User:alice", AclOperation.DESCRIBE),
                                             ("User:bob", AclOperation.DESCRIBE))]
        acls += [AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL, principal, "*",
                            AclOperation.READ, AclPermissionType.ALLOW) for principal in ("User:alice", "User:bob")]
        for future in admin.create_acls(acls).values():
            future.result(30)
        yield n
    finally:
        shutdown_all([n])


def confluent_config(node: SecureNode, auth: tuple[str, str], mechanism: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": f"localhost:{node.port}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": auth[0], "sasl.password": auth[1],
            "ssl.ca.location": str(node.ca), **extra}


def kafka_python_config(node: SecureNode, auth: tuple[str, str], mechanism: str) -> dict[str, Any]:
    return {"bootstrap_servers": f"localhost:{node.port}", "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism, "sasl_plain_username": auth[0], "sasl_plain_password": auth[1],
            "ssl_cafile": str(node.ca)}


def high_watermark(node: SecureNode) -> int:
    return node.session().get(f"{node.url}/v1/topics/orders/partitions/0/offsets",
                              timeout=10).json()["high_watermark"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes_over_sasl_ssl(node, mechanism):
    start = high_watermark(node)
    values = [f"confluent-{mechanism}-{i}".encode() for i in range(20)]
    producer = Producer(confluent_config(node, ALICE, mechanism, **{"enable.idempotence": True}))
    for value in values:
        producer.produce("orders", value=value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(confluent_config(node, ALICE, mechanism, **{"group.id": "unused",
                                                                     "enable.auto.commit": False}))
    consumer.assign([TopicPartition("orders", 0, start)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == values


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_and_consumes_over_sasl_ssl(node, mechanism):
    start = high_watermark(node)
    values = [f"kafka-python-{mechanism}-{i}".encode() for i in range(20)]
    producer = kafka.KafkaProducer(**kafka_python_config(node, ALICE, mechanism))
    try:
        for value in values:
            producer.send("orders", value=value, partition=0).get(timeout=30)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(**kafka_python_config(node, ALICE, mechanism), enable_auto_commit=False,
                                   consumer_timeout_ms=5000)
    try:
        tp = kafka.TopicPartition("orders", 0)
        consumer.assign([tp])
        consumer.seek(tp, start)
        got = [m.value for m in consumer][:len(values)]
    finally:
        consumer.close()
    assert got == values


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_is_each_clients_authentication_error(node, mechanism):
    errors: list[KafkaError] = []
    admin = AdminClient(confluent_config(node, (ALICE[0], "wrong"), mechanism, error_cb=errors.append))
    def refused() -> bool:
        admin.poll(0.1)
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    wait_for(refused, 30, what="librdkafka's _AUTHENTICATION error")
    config = kafka_python_config(node, (ALICE[0], "wrong"), mechanism)
    del config["bootstrap_servers"]
    with pytest.raises(kafka.errors.SaslAuthenticationFailedError):
        kafka_python_connect(node.port, host="localhost", **config)


def test_an_acl_denial_is_topic_authorization_failed_for_each_client(node):
    before = high_watermark(node)
    producer = Producer(confluent_config(node, BOB, "SCRAM-SHA-256", retries=0))
    reports: list[Any] = []
    producer.produce("orders", value=b"bob", partition=0, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(30)
    assert [e.code() for e in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], reports

    kp = kafka.KafkaProducer(**kafka_python_config(node, BOB, "SCRAM-SHA-512"), retries=0)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            kp.send("orders", value=b"bob", partition=0).get(timeout=30)
    finally:
        kp.close()

    consumer = Consumer(confluent_config(node, BOB, "SCRAM-SHA-256", **{"group.id": "unused"}))
    consumer.assign([TopicPartition("orders", 0, 0)])
    try:
        error = wait_for(lambda: _first_error(consumer), 30, what="the consumer's fetch refused")
    finally:
        consumer.close()
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    assert high_watermark(node) == before


def _first_error(consumer: Consumer) -> KafkaError | None:
    message = consumer.poll(0.5)
    return None if message is None else message.error()



def request_counts(node: SecureNode) -> dict[tuple[str, str], float]:
    """kafka_network_requestmetrics_errors_total by (request, error), scraped from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = node.session().get(f"{node.url}/metrics", timeout=10).text
    return {(s.labels["request"], s.labels["error"]): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "kafka_network_requestmetrics_errors_total"}


def test_api_versions_and_sasl_requests_are_counted_in_the_request_metrics(node):
    """Kafka counts ApiVersions, SaslHandshake and SaslAuthenticate in its RequestMetrics like any
    request: a client that logs in, and one with a wrong password, show in /metrics."""
    before = request_counts(node)
    admin = AdminClient(confluent_config(node, ALICE, "SCRAM-SHA-256"))
    admin.list_topics(timeout=30)
    config = kafka_python_config(node, (ALICE[0], "wrong"), "SCRAM-SHA-512")
    del config["bootstrap_servers"]
    with pytest.raises(kafka.errors.SaslAuthenticationFailedError):
        kafka_python_connect(node.port, host="localhost", **config)
    after = request_counts(node)
    grown = {key for key, value in after.items() if value > before.get(key, 0)}
    assert {("ApiVersions", "NONE"), ("SaslHandshake", "NONE"), ("SaslAuthenticate", "NONE"),
            ("SaslAuthenticate", "SASL_AUTHENTICATION_FAILED")} <= grown, sorted(grown)

"""The Kafka protocol's listeners on real nodes with real clients (issue 23's network layer): the
client port answers Kafka clients and HTTP on one port (plain and TLS), a Kafka-only SASL
listener (`kafka.listen`) authenticates kafka-python and confluent-kafka with PLAIN and
SCRAM-SHA-256/512 against the credentials the HTTP API uses, every broker registers its Kafka
endpoints, and bad frames from a raw socket close only their own connection.

Metadata and the other APIs come with their handlers (later); until then the real clients are
driven up to what exists: kafka-python's connection set-up (ApiVersions, then the SASL exchange),
and confluent-kafka, whose first request after authenticating is Metadata."""

from __future__ import annotations

import json
import re
import socket
import struct
import time
from pathlib import Path

import msgpack
import pytest
import requests
from kio.schema.errors import ErrorCode

from harness import CLUSTER_SECRET, NodeProcess, closed_by_peer, free_port, shutdown_all, wait_for
from kafka_wire import (
    API_VERSIONS, kafka_python_connect, metadata_request, read_frame_blocking, read_response, request_bytes)
from kraft.kafka.frames import frame
from security_support import SecureNode, make_certs, node_request, tls_overrides

ALICE = ("alice", "alice-secret-0xC3")
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A node like the no-flag one (its client port serves HTTP and Kafka) with a Kafka-only
    SASL_PLAINTEXT listener and alice's SCRAM credentials."""
    root = tmp_path_factory.mktemp("kafka-listener")
    sasl_port = free_port()
    n = NodeProcess(node_id=1, data_dir=root / "data-1", wait_ready_on_start=True, overrides={
        "controller.quorum.secret": CLUSTER_SECRET, "kafka.listen": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": MECHANISMS, "connections.max.idle.ms": 3000,
    }, args=[arg for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
             for arg in ("--add-scram", f"{m}=[name={ALICE[0]},password={ALICE[1]}]")])
    n.sasl_port = sasl_port  # type: ignore[attr-defined]
    try:
        n.start()
        wait_for(lambda: _snapshot_has_scram(n), 30, what="alice's credentials in the metadata")
        yield n
    finally:
        shutdown_all([n])


def _snapshot(node: NodeProcess) -> dict:
    answer = node_request(node.url, CLUSTER_SECRET, node.node_id, "GET", "/v1/controller/snapshot")
    assert answer.status_code == 200, answer.text
    return msgpack.unpackb(answer.content, raw=False)


def _snapshot_has_scram(node: NodeProcess) -> bool:
    users = requests.get(f"{node.url}/v1/users/scram-credentials", params={"user": ALICE[0]}, timeout=5).json()
    return [len(u["credentials"]) for u in users["users"]] == [2]


def _api_versions(port: int, version: int) -> tuple[int, object]:
    fields = {"client_software_name": "raw", "client_software_version": "1"} if version >= 3 else {}
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request_bytes(API_VERSIONS, version, 100 + version, **fields))
        return read_response(read_frame_blocking(sock), API_VERSIONS, version)


# -- the client port ----------------------------------------------------------------------------


def test_the_client_port_answers_kafka_clients_and_http(node):
    for version in range(4):
        correlation_id, response = _api_versions(node.port, version)
        assert correlation_id == 100 + version and response.error_code == ErrorCode.none
    assert isinstance(kafka_python_connect(node.port), tuple)
    assert requests.get(f"{node.url}/v1/health", timeout=5).json()["status"] == "ok"


def test_bad_frames_close_only_their_connection_and_leave_the_node_serving(node):
    def rss_kib() -> int:
        status = Path(f"/proc/{node.proc.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))

    before = rss_kib()
    huge = struct.pack(">i", 2**31 - 1) + b"\x00" * 65536  # a 2 GiB size, refused from its 4 bytes
    for port, data, truncated in (
            (node.port, frame(struct.pack(">hhi", 999, 0, 1) + b"\x00\x00"), False),  # an unknown API key
            (node.port, request_bytes(API_VERSIONS, 3, 1, client_software_name="a", client_software_version="1")[:-2],
             True),
            (node.port, huge, False),  # on the shared port: not a Kafka frame nor HTTP
            (node.sasl_port, huge, False)):  # on a Kafka-only one: over socket.request.max.bytes
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(data)
            if truncated:
                sock.shutdown(socket.SHUT_WR)  # the client gave up half-way through its frame
            assert closed_by_peer(sock)
    assert rss_kib() - before < 64 * 1024  # nothing near the 2 GiB the size asked for was allocated
    assert _api_versions(node.port, 3)[1].error_code == ErrorCode.none
    assert requests.get(f"{node.url}/v1/health", timeout=5).status_code == 200
    log = node.log_path.read_text()
    assert "unsupported API key 999" in log and "starts neither a Kafka frame" in log
    assert "socket.request.max.bytes" in log


def test_an_idle_kafka_connection_is_closed(node):
    with socket.create_connection(("127.0.0.1", node.sasl_port), timeout=10) as sock:
        started = time.monotonic()
        assert closed_by_peer(sock, timeout=30)
        assert time.monotonic() - started >= 2.5  # connections.max.idle.ms=3000, not sooner


def test_each_broker_registers_its_kafka_endpoints(node):
    [broker] = _snapshot(node)["brokers"]
    endpoints = broker[3]
    assert endpoints == [["HTTP", "127.0.0.1", node.port, "PLAINTEXT"],
                         ["PLAINTEXT", "127.0.0.1", node.port, "PLAINTEXT"],
                         ["SASL_PLAINTEXT", "127.0.0.1", node.sasl_port, "SASL_PLAINTEXT"]]
    # the HTTP API's metadata keeps its shape: the HTTP endpoint
    [http] = requests.get(f"{node.url}/v1/metadata", timeout=5).json()["brokers"]
    assert (http["host"], http["port"]) == ("127.0.0.1", node.port)


# -- SASL on the Kafka-only listener ------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS.split(","))
def test_kafka_python_authenticates_with_the_http_apis_credentials(node, mechanism):
    from kafka.errors import KafkaConnectionError, SaslAuthenticationFailedError

    security = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism}
    assert isinstance(kafka_python_connect(node.sasl_port, sasl_plain_username=ALICE[0],
                                            sasl_plain_password=ALICE[1], **security), tuple)
    for user, password in ((ALICE[0], "wrong"), ("nobody", ALICE[1])):
        with pytest.raises((SaslAuthenticationFailedError, KafkaConnectionError)) as failed:
            kafka_python_connect(node.sasl_port, sasl_plain_username=user, sasl_plain_password=password,
                                  **security)
        assert "Authentication failed" in str(failed.value) or isinstance(failed.value, SaslAuthenticationFailedError)


def test_without_sasl_a_sasl_listener_serves_nothing_but_api_versions(node):
    assert _api_versions(node.sasl_port, 3)[1].error_code == ErrorCode.none
    with socket.create_connection(("127.0.0.1", node.sasl_port), timeout=10) as sock:
        sock.sendall(metadata_request(1))
        assert closed_by_peer(sock)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_authenticates_and_a_wrong_password_is_refused(node, mechanism):
    """librdkafka reports a connection UP (its statistics) only once its SASL exchange succeeded;
    a wrong password is refused with SASL_AUTHENTICATION_FAILED (its _AUTHENTICATION error)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    def connect(password: str) -> tuple[list, list]:
        errors: list = []
        states: list = []
        admin = AdminClient({
            "bootstrap.servers": f"127.0.0.1:{node.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": ALICE[0], "sasl.password": password,
            "error_cb": errors.append, "statistics.interval.ms": 100,
            "stats_cb": lambda stats: states.extend(b["state"] for b in json.loads(stats)["brokers"].values())})
        deadline = time.monotonic() + 20
        while not errors and "UP" not in states and time.monotonic() < deadline:
            admin.poll(0.1)
        return errors, states

    errors, states = connect("wrong")
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors) and "UP" not in states, (errors, states)
    errors, states = connect(ALICE[1])
    assert "UP" in states and not any(e.code() == KafkaError._AUTHENTICATION for e in errors), (errors, states)


# -- TLS ----------------------------------------------------------------------------------------------


def test_tls_client_port_serves_kafka_and_https_and_sasl_ssl_authenticates(tmp_path):
    certs_dir = make_certs(tmp_path / "certs", [1])
    sasl_ssl_port = free_port()
    n = SecureNode(node_id=1, data_dir=tmp_path / "data-1", ca=certs_dir / "ca.pem", args=[
        "--add-scram", f"SCRAM-SHA-512=[name={ALICE[0]},password={ALICE[1]}]"],
        overrides=tls_overrides(certs_dir, 1, **{"kafka.listen": f"SASL_SSL://127.0.0.1:{sasl_ssl_port}",
                                                 "sasl.enabled.mechanisms": "SCRAM-SHA-512"}))
    try:
        n.start()
        n.wait_ready(30)
        tls = {"security_protocol": "SSL", "ssl_cafile": str(certs_dir / "ca.pem"), "ssl_check_hostname": False}
        assert isinstance(kafka_python_connect(n.port, **tls), tuple)  # Kafka after the TLS handshake
        assert n.session().get(f"{n.url}/v1/health", timeout=5).json()["status"] == "ok"  # HTTPS on the same port
        sasl = {**tls, "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_plain_username": ALICE[0], "sasl_plain_password": ALICE[1]}
        wait_for(lambda: kafka_python_connect(sasl_ssl_port, timeout_ms=5000, **sasl), 30,
                 what="SCRAM over SASL_SSL (once the credential is in the metadata)")
        with socket.create_connection(("127.0.0.1", n.port), timeout=10) as sock:  # plain bytes to a TLS port
            sock.sendall(request_bytes(API_VERSIONS, 0, 1))
            assert closed_by_peer(sock)
    finally:
        shutdown_all([n])


def _sequence_waits(node: NodeProcess, topic: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(f"{node.url}/metrics", timeout=10).text
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "kraft_produce_sequence_waits_total" and s.labels.get("topic") == topic)


def test_an_idempotent_producers_pipelined_requests_are_appended_in_order_and_never_parked(tmp_path):
    """Five acks=all Produce requests of one idempotent producer, pipelined on one connection
    (sequences 0-4): answered in order, appended in order, and none waited at the leader for its
    predecessor (kraft_produce_sequence_waits_total stays 0: the connection's requests reach the
    log in the order they came). A batch whose predecessor never comes is the one that waits, and
    is refused when the request's timeout ends it."""
    from kraft.log.batch import Record
    from kraft.log.kafka_batch import encode_batch

    n = NodeProcess(node_id=1, data_dir=tmp_path / "data-1", wait_ready_on_start=True,
                    overrides={"controller.quorum.secret": CLUSTER_SECRET})
    try:
        n.start()
        created = requests.post(f"{n.url}/v1/topics", json={"name": "piped", "partitions": 1}, timeout=10)
        assert created.status_code in (200, 201), created.text
        host, port = n.bootstrap.split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(request_bytes(22, 4, 1, transactional_id=None, transaction_timeout=60_000,
                                       producer_id=-1, producer_epoch=-1))
            _, ids = read_response(read_frame_blocking(sock), 22, 4)
            assert ids.error_code == ErrorCode.none

            def produce(correlation_id: int, sequence: int, timeout_ms: int = 30_000) -> bytes:
                batch = encode_batch([Record(0, int(time.time() * 1000), None, f"v{sequence}".encode())],
                                     base_offset=0, producer_id=ids.producer_id,
                                     producer_epoch=ids.producer_epoch, base_sequence=sequence)
                return request_bytes(0, 9, correlation_id, transactional_id=None, acks=-1, timeout=timeout_ms,
                                     topic_data=[{"name": "piped", "partition_data": [{"index": 0, "records": batch}]}])

            sock.sendall(b"".join(produce(10 + s, s) for s in range(5)))
            answers = [read_response(read_frame_blocking(sock), 0, 9) for _ in range(5)]
            assert [(c, r.responses[0].partition_responses[0].error_code, r.responses[0].partition_responses[0].base_offset)
                    for c, r in answers] == [(10 + s, ErrorCode.none, s) for s in range(5)]
            assert _sequence_waits(n, "piped") == 0

            sock.sendall(produce(20, 6, timeout_ms=100))  # sequence 5 never comes
            _, lost = read_response(read_frame_blocking(sock), 0, 9)
            assert lost.responses[0].partition_responses[0].error_code == ErrorCode.out_of_order_sequence_number
            assert _sequence_waits(n, "piped") == 1
    finally:
        shutdown_all([n])

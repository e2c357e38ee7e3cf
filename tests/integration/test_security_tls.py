"""TLS on the client listener with Kafka's PEM keys: plaintext is refused, the CA's clients are
served, and a 3-node SSL cluster replicates over TLS (the nodes' own clients use the truststore)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests

from kraft.api.client import Admin, KraftError, Producer
from harness import CLUSTER_SECRET, free_port, shutdown_all, wait_for
from security_support import SecureNode, make_certs, start_all, tls_overrides


def test_tls_listener_refuses_plaintext_and_serves_the_cas_clients(tmp_path):
    certs_dir = make_certs(tmp_path / "certs", [1])
    node = SecureNode(node_id=1, data_dir=tmp_path / "data-1", ca=certs_dir / "ca.pem",
                      overrides=tls_overrides(certs_dir, 1))
    try:
        node.start()
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{node.port}/v1/health", timeout=5)
        with pytest.raises(requests.exceptions.SSLError):  # a server the client's CAs do not vouch for
            requests.get(f"{node.url}/v1/health", timeout=5)
        http = node.session()
        wait_for(node.ready, 30, what="node ready")
        assert http.post(f"{node.url}/v1/topics", json={"name": "t", "partitions": 1}, timeout=10).status_code == 201
        assert http.post(f"{node.url}/v1/topics/t/records", json={"records": [{"value": "over tls"}]},
                         timeout=10).status_code == 200
        read = http.get(f"{node.url}/v1/topics/t/partitions/0/records", params={"offset": "earliest"}, timeout=10)
        assert [r["value"] for r in read.json()["records"]] == ["over tls"]
    finally:
        shutdown_all([node])


def _admin_error(bootstrap: str, **security: str) -> KraftError:
    with Admin(bootstrap, api_timeout_ms=20_000, **security) as admin:
        with pytest.raises(KraftError) as failed:
            admin.list_topics()
    return failed.value


def test_a_client_speaking_the_wrong_protocol_is_told_at_once(node, tmp_path):
    """Plain HTTP to a TLS listener was closed without an answer, retried as a disconnect for the
    tools' 15 s and reported as `RemoteDisconnected`; now the first failure says what to set, and is
    not retried. Likewise TLS to a plain listener, and a TLS client without the cluster's CA."""
    certs_dir = make_certs(tmp_path / "certs", [1])
    tls = SecureNode(node_id=1, data_dir=tmp_path / "data-1", ca=certs_dir / "ca.pem",
                     overrides=tls_overrides(certs_dir, 1))
    try:
        tls.start()
        cli = subprocess.run([sys.executable, "-m", "kraft.api.cli", "topics", "--list",
                              "--bootstrap-server", f"127.0.0.1:{tls.port}"], capture_output=True, text=True, timeout=60)
        assert cli.returncode == 1 and cli.stdout == "", cli
        assert cli.stderr.startswith(f"Error: NETWORK_EXCEPTION: the listener at 127.0.0.1:{tls.port} speaks TLS, "
                                     "and this client spoke plain HTTP to it"), cli.stderr
        assert "security.protocol=SSL (or SASL_SSL)" in cli.stderr and "--command-config" in cli.stderr
        plain = _admin_error(f"127.0.0.1:{tls.port}")
        assert "speaks TLS" in plain.message and not plain.retriable
        untrusted = _admin_error(f"localhost:{tls.port}", security_protocol="SSL")
        assert "presented a certificate this client does not trust" in untrusted.message, untrusted
        assert "ssl_cafile" in untrusted.message and not untrusted.retriable
    finally:
        shutdown_all([tls])
    not_tls = _admin_error(node.bootstrap, security_protocol="SSL", ssl_cafile=str(certs_dir / "ca.pem"))
    assert f"the listener at {node.bootstrap} does not speak TLS" in not_tls.message and not not_tls.retriable


def test_three_node_ssl_cluster_replicates_over_tls(tmp_path):
    certs_dir = make_certs(tmp_path / "certs", [1, 2, 3])
    raft = {i: free_port() for i in (1, 2, 3)}
    quorum = ",".join(f"{i}@127.0.0.1:{p}" for i, p in raft.items())
    nodes = [SecureNode(node_id=i, data_dir=tmp_path / f"data-{i}", controller_port=raft[i], quorum=quorum,
                        ca=certs_dir / "ca.pem",
                        overrides=tls_overrides(certs_dir, i, **{"controller.quorum.secret": CLUSTER_SECRET,
                                                                 "advertised.listeners": "localhost:0",
                                                                 "min.insync.replicas": 2}))
             for i in (1, 2, 3)]
    try:
        for n in nodes:
            n.start(wait=False)
        for n in nodes:
            n.wait_healthy(60)
        http = nodes[0].session()
        wait_for(lambda: all(n.ready() for n in nodes), 60, what="every node ready")
        created = http.post(f"{nodes[0].url}/v1/topics", json={"name": "r", "partitions": 1, "replication_factor": 3},
                            timeout=30)
        assert created.status_code == 201, created.text

        def full_isr(n: SecureNode) -> bool:
            topics = n.session().get(f"{n.url}/v1/metadata", params={"topics": "r"}, timeout=5).json()["topics"]
            return len(topics) == 1 and len(topics[0]["partitions"][0]["isr"]) == 3
        wait_for(lambda: all(full_isr(n) for n in nodes), 60, what="ISR of 3 over TLS, known to every node")
        answer = http.post(f"{nodes[1].url}/v1/topics/r/records", timeout=30,  # forwarded to the leader over TLS
                           json={"acks": "all", "records": [{"value": f"v{i}"} for i in range(20)]})
        assert answer.status_code == 200, answer.text
        for n in nodes:  # every replica has every record
            wait_for(lambda n=n: n.session().get(f"{n.url}/v1/topics/r/partitions/0/offsets",
                                                 timeout=5).json()["log_end_offset"] == 20, 30,
                     what=f"node {n.node_id} replicated")
    finally:
        shutdown_all(nodes)


def test_three_node_sasl_ssl_cluster_loses_no_acknowledged_record(tmp_path):
    """The issue's shape on three nodes (SASL_SSL, SCRAM, --add-scram on each): acks=all writes
    through the secured client survive killing the partition's leader."""
    password = "admin-secret-0xD4"
    certs_dir = make_certs(tmp_path / "certs", [1, 2, 3])
    raft = {i: free_port() for i in (1, 2, 3)}
    quorum = ",".join(f"{i}@127.0.0.1:{p}" for i, p in raft.items())
    secret_file = tmp_path / "cluster.secret"
    secret_file.write_text(CLUSTER_SECRET + "\n")
    nodes = [SecureNode(node_id=i, data_dir=tmp_path / f"data-{i}", controller_port=raft[i], quorum=quorum,
                        ca=certs_dir / "ca.pem", auth=("admin", password),
                        overrides=tls_overrides(certs_dir, i, "SASL_SSL", **{
                            "controller.quorum.secret.file": str(secret_file), "advertised.listeners": "localhost:0",
                            "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN", "min.insync.replicas": 2,
                            "replica.lag.time.max.ms": 3000, "broker.session.timeout.ms": 3000,
                            "broker.heartbeat.interval.ms": 300}),
                        args=["--add-scram", f"SCRAM-SHA-256=[name=admin,password={password}]"])
             for i in (1, 2, 3)]
    try:
        start_all(nodes)
        http = nodes[0].session()
        assert http.post(f"{nodes[0].url}/v1/topics", timeout=30,
                         json={"name": "safe", "partitions": 1, "replication_factor": 3}).status_code == 201

        def isr() -> list[int]:
            [topic] = http.get(f"{nodes[0].url}/v1/metadata", params={"topics": "safe"}, timeout=5).json()["topics"]
            return topic["partitions"][0]["isr"]
        wait_for(lambda: len(isr()) == 3, 60, what="ISR of 3")
        bootstrap = ",".join(f"localhost:{n.port}" for n in nodes)
        producer = Producer(bootstrap, acks="all", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                            sasl_plain_username="admin", sasl_plain_password=password, ssl_cafile=str(certs_dir / "ca.pem"))
        with producer:
            futures = [producer.send("safe", f"v{i}".encode()) for i in range(200)]
            producer.flush(60)
        acked = {f.get(timeout=5).offset for f in futures}
        assert len(acked) == 200
        [topic] = http.get(f"{nodes[0].url}/v1/metadata", params={"topics": "safe"}, timeout=5).json()["topics"]
        leader = topic["partitions"][0]["leader"]
        nodes[leader - 1].kill()
        survivor = next(n for n in nodes if n.node_id != leader)

        def read_all() -> list[str] | None:
            answer = survivor.session().get(f"{survivor.url}/v1/topics/safe/partitions/0/records", timeout=10,
                                            params={"offset": "earliest", "max_records": 1000})
            return [r["value"] for r in answer.json()["records"]] if answer.status_code == 200 else None
        values = wait_for(lambda: (lambda v: v if v and len(v) >= 200 else None)(read_all()), 60,
                          what="every acknowledged record on the new leader")
        assert values[:200] == [f"v{i}" for i in range(200)]
        logs = "".join(n.log_path.read_text(errors="replace") for n in nodes)
        assert password not in logs and CLUSTER_SECRET not in logs
    finally:
        shutdown_all(nodes)

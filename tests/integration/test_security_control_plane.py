"""The issue's three attacks on the control plane, replayed by an outsider without the cluster's
secret on a plaintext 3-node cluster (RF 3, min.insync.replicas 2): each request is refused with
403 CLUSTER_AUTHORIZATION_FAILED and changes nothing. The cluster's own signed requests pass."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Any

import msgpack
import pytest
import requests

from harness import CLUSTER_SECRET, REPLICATION_OVERRIDES, Cluster, partition_state, wait_for
from security_support import node_request

TOPIC = "guarded"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("secure-cp"), controllers=3, combined=True,
                 overrides=REPLICATION_OVERRIDES) as c:
        c.start()
        c.create_topic(TOPIC, partitions=1, replication_factor=3)
        c.wait_for_same_metadata(lambda m: any(t["name"] == TOPIC and len(t["partitions"][0]["isr"]) == 3
                                               for t in m["topics"]))
        produce(c, 1, [f"r{i}" for i in range(12)])
        yield c


def produce(cluster: Cluster, via: int, values: list[str], timeout: float = 30.0) -> requests.Response:
    return requests.post(f"{cluster.node(via).url}/v1/topics/{TOPIC}/records",
                         json={"acks": "all", "records": [{"value": v} for v in values]}, timeout=timeout)


def assert_refused(response: requests.Response) -> None:
    assert response.status_code == 403, response.text
    msgpacked = response.headers["Content-Type"].startswith("application/msgpack")
    body = msgpack.unpackb(response.content) if msgpacked else response.json()
    assert body["error_code"] == "CLUSTER_AUTHORIZATION_FAILED" and body["retriable"] is False


def state(cluster: Cluster) -> dict[str, Any]:
    metadata = cluster.wait_for_same_metadata()
    [topic] = [t for t in metadata["topics"] if t["name"] == TOPIC]
    return {"brokers": sorted(b["node_id"] for b in metadata["brokers"]), "partitions": topic["partitions"]}


def refused_count(cluster: Cluster, node_id: int) -> float:
    text = requests.get(f"{cluster.node(node_id).url}/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith('kraft_security_refused_requests_total{kind="cluster_authorization"}'):
            return float(line.split()[-1])
    raise AssertionError("no kraft_security_refused_requests_total metric")


def test_fake_broker_reassignment_and_alter_partition_are_refused(cluster):
    before = state(cluster)
    active = cluster.active_controller()
    url = cluster.node(active).url
    counted = refused_count(cluster, active)
    register = {"broker_id": 99, "incarnation_id": uuid.uuid4().hex, "cluster_id": None,
                "endpoints": [{"name": "HTTP", "host": "127.0.0.1", "port": 1}]}
    assert_refused(requests.post(f"{url}/v1/controller/brokers/register", json=register, timeout=10))
    assert_refused(requests.post(f"{url}/v1/controller/brokers/heartbeat", timeout=10, json={
        "broker_id": 99, "broker_epoch": 0, "current_metadata_offset": 0}))
    assert_refused(requests.get(f"{url}/v1/controller/snapshot", timeout=10))  # where the epochs were read
    assert_refused(requests.get(f"{url}/v1/controller/metadata", timeout=10))
    leader = before["partitions"][0]["leader"]
    # reassignment stays a client admin API (ACLs govern it): to a broker that does not exist it fails
    reassign = requests.post(f"{url}/v1/controller/reassignments", timeout=10, json={
        "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [99, 1, 2]}]})
    assert reassign.status_code >= 400, reassign.text
    assert_refused(requests.post(f"{url}/v1/controller/alter-partition", timeout=10, json={
        "broker_id": leader, "broker_epoch": 0, "topic": TOPIC, "partition": 0,
        "leader_epoch": before["partitions"][0]["leader_epoch"], "partition_epoch": 0,
        "new_isr_with_epochs": [{"broker_id": 99, "broker_epoch": 0}, {"broker_id": leader, "broker_epoch": 0}]}))
    # a forged node credential is no better than none
    assert_refused(requests.post(f"{url}/v1/controller/brokers/register", json=register, timeout=10,
                                 headers={"X-Kraft-Node-Auth": f"v1 {leader} 0 00 {'0' * 64}"}))
    assert_refused(node_request(url, "not-the-cluster-secret", leader, "POST", "/v1/controller/brokers/register",
                                register))
    assert state(cluster) == before
    assert refused_count(cluster, active) >= counted + 7
    # the cluster's own credential is served
    assert node_request(url, CLUSTER_SECRET, leader, "GET", "/v1/controller/snapshot").status_code == 200
    read = requests.get(f"{cluster.node(leader).url}/v1/topics/{TOPIC}/partitions/0/records",
                        params={"offset": "earliest", "max_records": 100}, timeout=10).json()
    assert len(read["records"]) >= 12


def test_replica_fetch_impersonation_acknowledges_nothing(cluster):
    part = partition_state(cluster, 1, TOPIC)
    leader = part["leader"]
    followers = [i for i in part["isr"] if i != leader]
    leader_url = cluster.node(leader).url
    offsets_url = f"{leader_url}/v1/topics/{TOPIC}/partitions/0/offsets"
    for f in followers:
        cluster.pause(f)
    outcome: dict[str, requests.Response] = {}
    try:
        writer = threading.Thread(target=lambda: outcome.setdefault("r", produce(cluster, leader, ["x"], 60)))
        writer.start()
        wait_for(lambda: (lambda o: o["log_end_offset"] > o["high_watermark"])(requests.get(offsets_url, timeout=5).json()),
                 what="the produce appended on the leader and waiting for its followers")
        before = requests.get(offsets_url, timeout=5).json()
        for f in followers:  # pretend both followers have everything
            fetch = {"replica_id": f, "replica_epoch": 0, "max_wait_ms": 0, "partitions": [
                {"topic": TOPIC, "partition": 0, "fetch_offset": before["log_end_offset"],
                 "current_leader_epoch": part["leader_epoch"]}]}
            assert_refused(requests.post(f"{leader_url}/v1/fetch", json=fetch, timeout=10))
            # nor may an outsider open a follower's replication channel (WebSocket handshake)
            assert_refused(requests.get(f"{leader_url}/v1/replication?replica_id={f}", timeout=10, headers={
                "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}))
        after = requests.get(offsets_url, timeout=5).json()
        assert after["high_watermark"] == before["high_watermark"]
        assert "r" not in outcome  # nothing acknowledged without the real replicas
    finally:
        for f in followers:
            cluster.resume(f)
    writer.join(90)
    assert outcome["r"].status_code == 200, outcome["r"].text  # the real followers complete it


def test_reregistration_and_isr_shrink_spam_change_nothing(cluster):
    before = state(cluster)
    active = cluster.active_controller()
    url = cluster.node(active).url
    part = before["partitions"][0]
    for broker_id in before["brokers"]:
        assert_refused(requests.post(f"{url}/v1/controller/brokers/register", timeout=10, json={
            "broker_id": broker_id, "incarnation_id": uuid.uuid4().hex,
            "endpoints": [{"name": "HTTP", "host": "127.0.0.1", "port": 1}]}))
        assert_refused(requests.post(f"{url}/v1/controller/brokers/unregister", timeout=10,
                                     json={"broker_id": broker_id}))
    for _ in range(5):
        assert_refused(requests.post(f"{url}/v1/controller/alter-partition", timeout=10, json={
            "broker_id": part["leader"], "broker_epoch": 0, "topic": TOPIC, "partition": 0,
            "leader_epoch": part["leader_epoch"], "partition_epoch": 0,
            "new_isr_with_epochs": [{"broker_id": part["leader"], "broker_epoch": 0}]}))
    assert produce(cluster, 1, ["after-spam"]).status_code == 200
    assert state(cluster) == before


def test_no_secret_in_any_log_line(cluster):
    logs = [cluster.node(i).log_path.read_text(errors="replace") for i in cluster.nodes]
    assert any("refused" in text for text in logs)  # the refusals were logged...
    assert not any(CLUSTER_SECRET in text for text in logs)  # ...without the secret


def test_secret_file_keeps_the_secret_out_of_the_process_list(tmp_path):
    secret = "file-held-" + uuid.uuid4().hex
    secret_file = tmp_path / "secret"
    secret_file.write_text(secret + "\n")
    secret_file.chmod(0o600)
    with Cluster(tmp_path / "c", controllers=1, brokers=1, combined=True,
                 overrides={"controller.quorum.secret.file": str(secret_file)}) as c:
        for node in c.nodes.values():  # the file only: no secret flag at all
            node.overrides.pop("controller.quorum.secret", None)
        c.start()
        for node in c.nodes.values():
            assert node.proc is not None
            cmdline = Path(f"/proc/{node.proc.pid}/cmdline").read_bytes()
            assert secret.encode() not in cmdline and str(secret_file).encode() in cmdline
        assert node_request(c.node(1).url, secret, 2, "GET", "/v1/controller/snapshot").status_code == 200
        assert_refused(node_request(c.node(1).url, CLUSTER_SECRET, 2, "GET", "/v1/controller/snapshot"))
        assert not any(secret in c.node(i).log_path.read_text(errors="replace") for i in c.nodes)
    assert os.stat(secret_file).st_mode & 0o077 == 0

"""ZooKeeper mode against a real ZooKeeper: the znodes are Kafka's, byte for byte where Kafka's
are deterministic; the same broker serves produce/consume; a killed controller is replaced
after its session expires with a higher epoch; a paused controller that wakes after its session
expired is fenced (brokers refuse its epoch, none follows it); ISR expansion is written by the
partition leader; configuration and connection errors are clear."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from kraft.api.client import Admin, KraftError, TopicPartition
from harness import CLUSTER_SECRET, NODE_COMMAND, free_port, partition_offsets, raw_log, wait_for
from kraft.bench.chaos.clients import AckedProducer, WatchingConsumer, audit, read_partition
from integration.test_replication_cluster import chaos_round, wait_full_isr, wait_leader
from kraft.zk.ensemble import ZooKeeperEnsemble
from zk_support import SESSION_TIMEOUT_MS, ZkCluster, ZkNode

pytestmark = [pytest.mark.zookeeper, pytest.mark.cluster]

TOPIC = "zk-topic"
REPLICATION = {"min.insync.replicas": 2, "replica.lag.time.max.ms": 3000, "replica.fetch.wait.max.ms": 200}


def znode(zookeeper: ZooKeeperEnsemble, chroot: str, path: str) -> tuple[Any, Any]:
    client = zookeeper.client(chroot)
    client.start(timeout=10)
    try:
        return client.get(path)
    finally:
        client.stop()
        client.close()


def znode_json(zookeeper: ZooKeeperEnsemble, chroot: str, path: str) -> Any:
    return json.loads(znode(zookeeper, chroot, path)[0])


def controller_epoch(zookeeper: ZooKeeperEnsemble, chroot: str) -> int:
    return int(znode(zookeeper, chroot, "/controller_epoch")[0])


def create_topic(cluster: ZkCluster, via: int, name: str, partitions: int = 1, rf: int = 3,
                 configs: dict[str, str] | None = None) -> dict[str, Any]:
    response = requests.post(f"{cluster.node(via).url}/v1/topics", timeout=40, json={
        "name": name, "partitions": partitions, "replication_factor": rf, "configs": configs or {}})
    assert response.status_code == 201, response.text
    return response.json()


def topic_state(cluster: ZkCluster, node_id: int, name: str) -> list[dict[str, Any]]:
    [topic] = [t for t in cluster.metadata(node_id)["topics"] if t["name"] == name]
    return topic["partitions"]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperEnsemble, tmp_path_factory: pytest.TempPathFactory):
    c = ZkCluster(tmp_path_factory.mktemp("zk-cluster"), zookeeper, chroot="/shared", **REPLICATION)
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.mark.timeout(120)
def test_znodes_are_kafkas(cluster: ZkCluster, zookeeper: ZooKeeperEnsemble) -> None:
    created = create_topic(cluster, 2, "json-topic", partitions=2, configs={"retention.ms": "60000"})
    chroot = cluster.chroot
    cluster_id = cluster.node(1).health()["cluster_id"]
    assert znode_json(zookeeper, chroot, "/cluster/id") == {"version": "1", "id": cluster_id}
    controller = cluster.controller()
    data = znode_json(zookeeper, chroot, "/controller")
    assert data.keys() == {"version", "brokerid", "timestamp"} and data["version"] == 1
    assert data["brokerid"] == controller and data["timestamp"].isdigit()
    assert controller_epoch(zookeeper, chroot) >= 1
    for broker_id in (1, 2, 3):
        node = cluster.node(broker_id)
        data, stat = znode(zookeeper, chroot, f"/brokers/ids/{broker_id}")
        assert stat.ephemeralOwner != 0  # ephemeral: gone with the broker's session
        broker = json.loads(data)
        assert broker.pop("timestamp").isdigit()
        assert broker == {"version": 5, "host": "127.0.0.1", "port": node.port,
                          "endpoints": [f"PLAINTEXT://127.0.0.1:{node.port}"], "jmx_port": -1,
                          "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "features": {}}
    topic = znode_json(zookeeper, chroot, "/brokers/topics/json-topic")
    partitions = topic_state(cluster, 1, "json-topic")
    assert topic == {"version": 3, "topic_id": created["topic_id"],
                     "partitions": {str(p["partition"]): p["replicas"] for p in partitions},
                     "adding_replicas": {}, "removing_replicas": {}}
    for p in partitions:
        state = znode_json(zookeeper, chroot, f"/brokers/topics/json-topic/partitions/{p['partition']}/state")
        assert state == {"version": 1, "leader": p["leader"], "leader_epoch": p["leader_epoch"],
                         "controller_epoch": state["controller_epoch"], "isr": p["isr"]}
        assert 1 <= state["controller_epoch"] <= controller_epoch(zookeeper, chroot)
    assert znode_json(zookeeper, chroot, "/config/topics/json-topic") == {
        "version": 1, "config": {"retention.ms": "60000"}}
    # AdminZkClient-style deletion: marked in /admin/delete_topics, gone from every broker
    assert requests.delete(f"{cluster.node(3).url}/v1/topics/json-topic", timeout=40).status_code in (200, 202, 204)
    wait_for(lambda: all(not [t for t in cluster.metadata(i)["topics"] if t["name"] == "json-topic"]
                         for i in (1, 2, 3)), 30, what="the topic gone everywhere")
    client = zookeeper.client(chroot)
    client.start(timeout=10)
    try:
        wait_for(lambda: client.exists("/brokers/topics/json-topic") is None
                 and not client.get_children("/admin/delete_topics"), 30, what="the topic's znodes deleted")
    finally:
        client.stop()
        client.close()


@pytest.mark.timeout(180)
def test_produce_consume_and_leader_written_isr_expansion(cluster: ZkCluster, zookeeper: ZooKeeperEnsemble) -> None:
    create_topic(cluster, 1, TOPIC)
    bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
    producer = AckedProducer(bootstrap, TOPIC).start()
    consumer = WatchingConsumer(bootstrap, TOPIC).start()
    try:
        producer.wait_acked_more(300, 60)
        [partition] = topic_state(cluster, 1, TOPIC)
        leader = partition["leader"]
        follower = next(b for b in partition["replicas"] if b != leader)
        path = f"/brokers/topics/{TOPIC}/partitions/0/state"
        _, before = znode(zookeeper, cluster.chroot, path)
        cluster.node(follower).kill()  # its session expires: the controller takes it out of the ISR
        wait_for(lambda: follower not in znode_json(zookeeper, cluster.chroot, path)["isr"], 30,
                 what=f"broker {follower} out of the ISR")
        producer.wait_acked_more(300, 60)  # min.insync.replicas 2: still acknowledged
        cluster.node(follower).start()
        # back in sync, the leader (not the controller) expands the ISR with a conditional setData
        wait_for(lambda: sorted(znode_json(zookeeper, cluster.chroot, path)["isr"]) == [1, 2, 3], 60,
                 what="the ISR expanded by the leader")
        state, after = znode(zookeeper, cluster.chroot, path)
        assert json.loads(state)["leader"] == leader and after.version >= before.version + 2
        wait_for(lambda: all(sorted(topic_state(cluster, i, TOPIC)[0]["isr"]) == [1, 2, 3] for i in (1, 2, 3)),
                 30, what="every broker sees the expanded ISR (isr_change_notification)")
        producer.wait_acked_more(300, 60)
    finally:
        producer.stop()
        consumer.stop()
    high_watermark = wait_for(
        lambda: (o := partition_offsets(cluster.node(leader), TOPIC))["high_watermark"] == o["log_end_offset"]
        and o["high_watermark"], 30, what="the high watermark at the log end")
    report = audit(producer.acked, read_partition(bootstrap, TOPIC, 0, high_watermark), consumer.seen)
    assert report.acked >= 900 and report.lost == 0 and report.truncated_seen == 0, report
    assert len(consumer.seen) > 0


def kraft_cli(node: ZkNode, command: str, *args: str, stdin: str | None = None,
              returncode: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-c", "from kraft.api.cli import main; main()", command,
                             "--bootstrap-server", node.bootstrap, *args],
                            input=stdin, capture_output=True, text=True, timeout=60)
    assert result.returncode == returncode, result.stderr + result.stdout
    return result


@pytest.mark.timeout(120)
def test_groups_and_cli_work_unchanged(cluster: ZkCluster) -> None:
    create_topic(cluster, 3, "grouped", partitions=2)
    kraft_cli(cluster.node(1), "console-producer", "--topic", "grouped", stdin="a\nb\nc\nd\n")
    out = kraft_cli(cluster.node(2), "console-consumer", "--topic", "grouped", "--group", "g1",
                    "--from-beginning", "--max-messages", "4").stdout.split()
    assert sorted(out) == ["a", "b", "c", "d"]
    with Admin(cluster.node(3).bootstrap) as admin:  # offsets committed in __consumer_offsets
        assert sum(admin.list_group_offsets("g1").values()) == 4
    status = kraft_cli(cluster.node(1), "metadata-quorum", "describe", "--status").stdout
    assert status.splitlines()[0].startswith("MetadataMode:           ZooKeeper (no Raft metadata quorum")
    assert cluster.zookeeper.connect + cluster.chroot in status.splitlines()[0]
    assert f"LeaderId:               {cluster.controller()}" in status
    assert "CurrentVoters:          []" in status
    replication = kraft_cli(cluster.node(1), "metadata-quorum", "describe", "--replication").stdout
    assert "there is no Raft metadata quorum" in replication
    quorum = requests.get(f"{cluster.node(2).url}/v1/controller/quorum", timeout=10).json()
    assert quorum["metadata_mode"] == "zookeeper" and quorum["current_voters"] == []


@pytest.mark.timeout(120)
def test_leader_election_and_reassignment_say_they_are_not_supported(cluster: ZkCluster) -> None:
    """Answered at once with UNSUPPORTED_VERSION (not retriable), where NOT_CONTROLLER had the CLI
    retry for 15 s and then blame node 1."""
    create_topic(cluster, 1, "elect-me", partitions=1)
    result = kraft_cli(cluster.node(2), "leader-election", "--election-type", "preferred", "--all-topic-partitions",
                       returncode=1)
    assert result.stderr.strip() == (
        "Error: UNSUPPORTED_VERSION: preferred leader election (kafka-leader-election) is not supported in "
        "ZooKeeper mode: this cluster keeps its metadata in ZooKeeper (zookeeper.connect); it is a KRaft-mode "
        "operation here"), result.stderr
    with Admin(cluster.node(3).bootstrap) as admin:
        with pytest.raises(KraftError) as listed:
            admin.list_partition_reassignments()
        with pytest.raises(KraftError) as altered:
            admin.alter_partition_reassignments({TopicPartition("elect-me", 0): [1]})
    for error in (listed.value, altered.value):
        assert error.error_code == "UNSUPPORTED_VERSION" and "partition reassignment" in error.message, error


@pytest.mark.spread  # its own cluster: not the module's
@pytest.mark.timeout(240)
def test_replication_chaos_round_loses_nothing(zookeeper: ZooKeeperEnsemble, tmp_path: Path) -> None:
    """KRaft mode's replication no-loss round (kill -9 the leader, SIGSTOP the next one past its
    session, kill a follower; restarts in between) on ZooKeeper mode: every acknowledged record
    is at its offset, no consumer saw a truncated one, the replicas' logs are identical."""
    cluster = ZkCluster(tmp_path, zookeeper, chroot="/chaos", **REPLICATION)
    try:
        cluster.start()
        create_topic(cluster, 1, "chaos")
        wait_full_isr(cluster)
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        producer = AckedProducer(bootstrap, "chaos").start()
        consumer = WatchingConsumer(bootstrap, "chaos").start()
        try:
            pinned = chaos_round(cluster, producer, 0)  # type: ignore[arg-type]
        finally:
            producer.stop()
            consumer.stop()
        wait_full_isr(cluster)  # type: ignore[arg-type]
        leader = wait_leader(cluster)  # type: ignore[arg-type]
        high_watermark = wait_for(
            lambda: (o := partition_offsets(cluster.node(leader), "chaos"))["high_watermark"] == o["log_end_offset"]
            and o["high_watermark"], 30, what="the high watermark at the log end")
        report = audit(producer.acked | pinned, read_partition(bootstrap, "chaos", 0, high_watermark), consumer.seen)
        assert report.acked >= 500 and report.lost == 0 and report.truncated_seen == 0, report
        assert report.log_records == high_watermark
        cluster.stop()
        raw = [raw_log(cluster.node(i).data_dir / "chaos-0", high_watermark) for i in (1, 2, 3)]
        assert raw[0] == raw[1] == raw[2] and raw[0]
    finally:
        cluster.stop()


@pytest.mark.spread  # its own cluster: not the module's
@pytest.mark.timeout(180)
def test_killed_controller_is_replaced_with_a_higher_epoch(zookeeper: ZooKeeperEnsemble, tmp_path: Path) -> None:
    cluster = ZkCluster(tmp_path, zookeeper, chroot="/failover", **REPLICATION)
    try:
        cluster.start()
        old = cluster.controller()
        epoch = controller_epoch(zookeeper, cluster.chroot)
        create_topic(cluster, old, "led", partitions=3)
        led = [p["partition"] for p in topic_state(cluster, old, "led") if p["leader"] == old]
        assert led  # placement gives every broker one leadership of 3 partitions
        cluster.node(old).kill()  # kill -9: /controller and /brokers/ids/<old> go after the session timeout
        others = [i for i in (1, 2, 3) if i != old]
        new = cluster.controller(exclude=(old,))
        assert new != old and controller_epoch(zookeeper, cluster.chroot) > epoch
        cluster.wait_for_brokers(others, on=others)
        for node_id in others:
            for p in topic_state(cluster, node_id, "led"):
                assert p["leader"] in others and old not in p["isr"], p
        create_topic(cluster, others[0], "after-failover", rf=2)
        wait_for(lambda: all(topic_state(cluster, i, "after-failover") for i in others), 30,
                 what="the new topic on every live broker")
    finally:
        cluster.stop()


@pytest.mark.spread  # its own cluster: not the module's
@pytest.mark.timeout(180)
def test_paused_controller_is_fenced_when_it_wakes(zookeeper: ZooKeeperEnsemble, tmp_path: Path) -> None:
    cluster = ZkCluster(tmp_path, zookeeper, chroot="/paused", **REPLICATION)
    try:
        cluster.start()
        old = cluster.controller()
        old_epoch = controller_epoch(zookeeper, cluster.chroot)
        others = [i for i in (1, 2, 3) if i != old]
        cluster.node(old).pause()  # SIGSTOP past the session timeout
        try:
            new = cluster.controller(exclude=(old,))
            new_epoch = controller_epoch(zookeeper, cluster.chroot)
            assert new != old and new_epoch > old_epoch
            cluster.wait_for_brokers(others, on=others)
        finally:
            cluster.node(old).resume()  # wakes believing it is the controller
        # it learns it is not (session expired, or a broker refused its epoch) and follows the new one
        wait_for(lambda: not cluster.node(old).health()["active_controller"], 30, what="the old controller resigned")
        answers = cluster.wait_for_brokers([1, 2, 3], timeout=60)
        assert {a["controller_id"] for a in answers.values()} == {new}
        assert "resigns" in cluster.node(old).log_path.read_text()
        # none follows it: every broker keeps the new controller's view (the epoch check itself,
        # STALE_CONTROLLER_EPOCH, is unit-tested in tests/unit/zk/test_zk_receiver.py)
        for node_id in (1, 2, 3):
            assert cluster.metadata(node_id)["controller_id"] == new
    finally:
        cluster.stop()


def test_a_data_dir_of_another_cluster_is_refused(cluster: ZkCluster, zookeeper: ZooKeeperEnsemble,
                                                  tmp_path: Path) -> None:
    """Kafka's check: meta.properties names another cluster than /cluster/id (issue 22 item 10)."""
    cluster_id = cluster.node(1).health()["cluster_id"]
    stray = ZkNode(node_id=9, data_dir=tmp_path / "data-9", overrides=dict(cluster.node(1).overrides))
    stray.data_dir.mkdir(parents=True)
    (stray.data_dir / "meta.properties").write_text("version=1\ncluster.id=anOldClusterOfNode9xx\nnode.id=9\n")
    stray.start(wait=False)
    assert stray.proc is not None and stray.proc.wait(60) == 1
    refusal = [line for line in stray.log_path.read_text().splitlines() if "node 9 stops:" in line]
    assert refusal and "anOldClusterOfNode9xx" in refusal[0] and cluster_id in refusal[0], stray.log_tail()
    assert znode_json(zookeeper, "/shared", "/cluster/id")["id"] == cluster_id
    assert 9 not in [b["node_id"] for b in cluster.metadata(1)["brokers"]]


def test_role_or_quorum_with_zookeeper_is_a_configuration_error(tmp_path: Path) -> None:
    for flags in (["--role", "broker"], ["--controller-quorum", "1@127.0.0.1:9093"]):
        result = subprocess.run(NODE_COMMAND + ["--zookeeper-connect", "127.0.0.1:2181", "--data-dir",
                                                str(tmp_path / "data"), *flags],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, result.stderr
        assert "not used in ZooKeeper mode" in result.stderr


@pytest.mark.timeout(120)
def test_zookeeper_unreachable_at_start_is_a_clear_error(tmp_path: Path) -> None:
    node = ZkNode(node_id=1, data_dir=tmp_path / "data-1", overrides={
        "zookeeper.connect": f"127.0.0.1:{free_port()}", "zookeeper.connection.timeout.ms": 1000,
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "controller.quorum.secret": CLUSTER_SECRET})
    node.start(wait=False)
    assert node.proc is not None
    assert node.proc.wait(60) == 1
    assert "unreachable within 1 s (zookeeper.connection.timeout.ms)" in node.log_path.read_text()


@pytest.mark.spread  # its own cluster: not the module's
@pytest.mark.timeout(240)
def test_zookeeper_lost_mid_run_keeps_serving_and_loses_nothing(tmp_path: Path) -> None:
    """ZooKeeper down: leaders keep acknowledging acks=all writes with the ISR they have, admin
    requests answer a retriable NETWORK_EXCEPTION; back up, the same sessions carry on."""
    zookeeper = ZooKeeperEnsemble(tmp_path / "own-zookeeper").start()
    cluster = ZkCluster(tmp_path, zookeeper, chroot="/outage", **REPLICATION)
    try:
        cluster.start()
        create_topic(cluster, 1, TOPIC)
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        producer = AckedProducer(bootstrap, TOPIC).start()
        try:
            producer.wait_acked_more(200, 60)
            zookeeper.stop()  # kill -9 of the only ZooKeeper server
            producer.wait_acked_more(300, 60)
            response = requests.post(f"{cluster.node(2).url}/v1/topics", timeout=40,
                                     json={"name": "during-outage", "partitions": 1, "replication_factor": 3})
            assert response.status_code == 503 and response.json()["error_code"] == "NETWORK_EXCEPTION"
            assert "ZooKeeper" in response.json()["message"]
            zookeeper.start()  # same data dir and port: the sessions are resumed
            wait_for(lambda: requests.post(f"{cluster.node(2).url}/v1/topics", timeout=40, json={
                "name": "after-outage", "partitions": 1, "replication_factor": 3}).status_code in (201, 409),
                60, interval=0.5, what="topic creation working again")
            cluster.wait_for_brokers([1, 2, 3])
            producer.wait_acked_more(200, 60)
        finally:
            producer.stop()
        leader = topic_state(cluster, 1, TOPIC)[0]["leader"]
        high_watermark = wait_for(
            lambda: (o := partition_offsets(cluster.node(leader), TOPIC))["high_watermark"] == o["log_end_offset"]
            and o["high_watermark"], 30, what="the high watermark at the log end")
        report = audit(producer.acked, read_partition(bootstrap, TOPIC, 0, high_watermark), {})
        assert report.acked >= 700 and report.lost == 0, report
    finally:
        cluster.stop()
        zookeeper.stop()

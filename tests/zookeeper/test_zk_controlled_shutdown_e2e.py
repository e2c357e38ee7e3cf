"""Controlled shutdown in ZooKeeper mode (`controlled.shutdown.enable`, Kafka's default true), on a
real ZooKeeper: a SIGTERMed broker that leads a partition has the controller move the leadership
(and take it out of the ISR) before its broker znode goes; with the key false it just stops, and
the controller moves the leadership once the znode is gone. Either way acks=all writes go on and
nothing acknowledged is lost.

"Before" is read from ZooKeeper's own order: the zxid of the state znode's write that moved the
leadership against the zxid of the broker znode's deletion (`/brokers/ids`' pzxid)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
import requests

from harness import partition_offsets, wait_for
from kraft.bench.chaos.clients import AckedProducer, audit, read_partition
from kraft.zk.ensemble import ZooKeeperEnsemble
from zk_support import ZkCluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.cluster]

TOPIC = "handover"
REPLICATION = {"min.insync.replicas": 2, "replica.lag.time.max.ms": 3000, "replica.fetch.wait.max.ms": 200}


class StateHistory:
    """The versions of a topic's partition state znodes a kazoo DataWatch sees, as
    (leader, isr, mzxid) per partition."""

    def __init__(self, client: Any, topic: str, partitions: list[int]) -> None:
        self.lock = threading.Lock()
        self.seen: dict[int, list[tuple[int, list[int], int]]] = {p: [] for p in partitions}
        for p in partitions:
            client.DataWatch(f"/brokers/topics/{topic}/partitions/{p}/state", self._recorder(p))

    def _recorder(self, partition: int) -> Callable[[bytes | None, Any], None]:
        def record(data: bytes | None, stat: Any) -> None:
            if data:
                state = json.loads(data)
                with self.lock:
                    self.seen[partition].append((state["leader"], state["isr"], stat.mzxid))
        return record

    def first(self, partition: int, leader_not: int) -> tuple[int, list[int], int] | None:
        """The first version seen led by another broker than `leader_not`."""
        with self.lock:
            return next((s for s in self.seen[partition] if s[0] not in (leader_not, -1)), None)


def leaders(cluster: ZkCluster, via: int) -> dict[int, int]:
    [topic] = [t for t in cluster.metadata(via, TOPIC)["topics"] if t["name"] == TOPIC]
    return {p["partition"]: p["leader"] for p in topic["partitions"]}


def wait_full_isrs(cluster: ZkCluster) -> None:
    def full() -> bool:
        for node in cluster.running():
            [topic] = [t for t in cluster.metadata(node.node_id, TOPIC)["topics"] if t["name"] == TOPIC]
            if any(sorted(p["isr"]) != [1, 2, 3] for p in topic["partitions"]):
                return False
        return True
    wait_for(full, 60, what="every ISR back to [1, 2, 3]")


def stop_and_deletion_zxid(cluster: ZkCluster, client: Any, node_id: int) -> int:
    """SIGTERM `node_id`, wait for its clean exit; the zxid that deleted its broker znode."""
    assert cluster.node(node_id).stop(60) == 0
    assert client.exists(f"/brokers/ids/{node_id}") is None
    return client.exists("/brokers/ids").pzxid  # its last child change: this deletion


@pytest.mark.timeout(300)
def test_sigterm_moves_leadership_first_and_loses_nothing(zookeeper: ZooKeeperEnsemble, tmp_path: Path) -> None:
    cluster = ZkCluster(tmp_path, zookeeper, chroot="/controlled", **REPLICATION)
    cluster.node(3).overrides["controlled.shutdown.enable"] = "false"  # 1 and 2: Kafka's default, true
    client = zookeeper.client(cluster.chroot)
    producers: dict[int, AckedProducer] = {}
    try:
        cluster.start()
        r = requests.post(f"{cluster.node(1).url}/v1/topics", timeout=40,
                          json={"name": TOPIC, "partitions": 3, "replication_factor": 3})
        assert r.status_code == 201, r.text
        wait_full_isrs(cluster)
        led = leaders(cluster, 1)
        assert sorted(led.values()) == [1, 2, 3], led  # placement: one leadership each
        by_leader = {leader: p for p, leader in led.items()}
        controller = cluster.controller()
        # a broker that is not the controller asks it over the inter-node route
        graceful = next(i for i in (1, 2) if i != controller)
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        for leader in (graceful, 3):
            producers[by_leader[leader]] = AckedProducer(bootstrap, TOPIC, partition=by_leader[leader],
                                                         prefix=b"p%d" % by_leader[leader]).start()
        for producer in producers.values():
            producer.wait_acked_more(200, 60)
        client.start(timeout=10)
        history = StateHistory(client, TOPIC, sorted(led))

        # controlled shutdown: the leadership (and the ISR) moved before the broker znode went
        deleted = stop_and_deletion_zxid(cluster, client, graceful)
        moved = wait_for(lambda: history.first(by_leader[graceful], graceful), 30, what="the leadership moved")
        assert moved[2] < deleted, (moved, deleted)
        assert graceful not in moved[1]  # out of the ISR in the same write
        log = cluster.node(graceful).log_path.read_text()
        assert "controlled shutdown done, its leaderships moved" in log
        for p, leader in led.items():  # it left the ISRs it followed in too, while still registered
            if leader != graceful:
                versions = history.seen[p]
                assert any(graceful not in isr and zxid < deleted for _, isr, zxid in versions), versions
        producers[by_leader[graceful]].wait_acked_more(200, 60)  # acks=all goes on with the new leader

        cluster.node(graceful).start()
        cluster.wait_for_brokers([1, 2, 3])
        wait_full_isrs(cluster)

        # controlled.shutdown.enable=false: it just stops; the leadership moves after its znode went
        deleted = stop_and_deletion_zxid(cluster, client, 3)
        moved = wait_for(lambda: history.first(by_leader[3], 3), 60, what="the leadership moved")
        assert moved[2] > deleted, (moved, deleted)
        log = cluster.node(3).log_path.read_text()
        assert "broker 3: controlled shutdown" not in log and "broker 3: proceeding" not in log
        producers[by_leader[3]].wait_acked_more(200, 60)

        for producer in producers.values():
            producer.stop()
        for partition, producer in producers.items():
            leader = leaders(cluster, graceful)[partition]
            high_watermark = wait_for(
                lambda: (o := partition_offsets(cluster.node(leader), TOPIC, partition))["high_watermark"]
                == o["log_end_offset"] and o["high_watermark"], 30, what="the high watermark at the log end")
            report = audit(producer.acked, read_partition(bootstrap, TOPIC, partition, high_watermark), {})
            assert report.acked >= 600 and report.lost == 0, report
    finally:
        for producer in producers.values():
            producer.stop()
        client.stop()
        client.close()
        cluster.stop()

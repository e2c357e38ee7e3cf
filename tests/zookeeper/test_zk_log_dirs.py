"""A failed log directory in ZooKeeper mode, on a real ZooKeeper: the broker writes Kafka's
`/log_dir_event_notification/log_dir_event_<seq>` and the controller moves the leaderships and ISR
memberships of its replicas in that directory to other brokers, while its other directory keeps
serving (docs/zookeeper-mode.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from harness import wait_for
from kraft.log.fault_injection import LOG_DIR_FAILED_ENV
from kraft.zk.ensemble import ZooKeeperEnsemble
from zk_support import ZkCluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.cluster]

TOPIC = "jbod"
PARTITIONS = 6


def states(cluster: ZkCluster, via: int) -> dict[int, dict]:
    [topic] = [t for t in cluster.metadata(via, TOPIC)["topics"] if t["name"] == TOPIC]
    return {p["partition"]: p for p in topic["partitions"]}


def produce(cluster: ZkCluster, partition: int) -> requests.Response:
    """One record, acks=all: a leader or follower on the failed directory meets the failure."""
    return requests.post(f"{cluster.node(1).url}/v1/topics/{TOPIC}/records", timeout=30,
                         json={"records": [{"value": "x", "partition": partition}], "acks": "all"})


@pytest.mark.timeout(300)
def test_a_failed_log_directory_moves_its_replicas_off(zookeeper: ZooKeeperEnsemble, tmp_path: Path) -> None:
    cluster = ZkCluster(tmp_path, zookeeper, chroot="/logdirs", **{"replica.lag.time.max.ms": 30000})
    broker = cluster.node(3)
    first, second = broker.data_dir, tmp_path / "data-3-disk2"
    broker.overrides["log.dirs"] = f"{first},{second}"
    fail_file = tmp_path / "failed-log-dirs"
    broker.env[LOG_DIR_FAILED_ENV] = str(fail_file)
    try:
        cluster.start()
        r = requests.post(f"{cluster.node(1).url}/v1/topics", timeout=40,
                          json={"name": TOPIC, "partitions": PARTITIONS, "replication_factor": 3})
        assert r.status_code == 201, r.text
        wait_for(lambda: all(sorted(p["isr"]) == [1, 2, 3] for p in states(cluster, 1).values()), 60,
                 what="full ISRs")
        assert all(produce(cluster, p).status_code == 200 for p in range(PARTITIONS))  # makes the log dirs
        on_second = wait_for(lambda: {int(d.name.rpartition("-")[2]) for d in second.glob(f"{TOPIC}-*")} or None,
                             30, what="replicas on the second directory")
        on_first = set(range(PARTITIONS)) - on_second
        fail_file.write_text(f"{second}\n")
        for p in range(PARTITIONS):  # the broker meets the failure at its next write there
            produce(cluster, p)

        def moved_off() -> bool:
            state = states(cluster, 1)
            return all(3 not in state[p]["isr"] and state[p]["leader"] not in (3, -1) for p in on_second)

        wait_for(moved_off, 20, what="leaderships and ISR memberships off the failed directory "
                                     "(well before replica.lag.time.max.ms, 30 s)")
        state = states(cluster, 1)
        assert all(3 in state[p]["isr"] for p in on_first), state  # the other directory serves on
        assert "reports log directory failure" in cluster.node(cluster.controller()).log_path.read_text()
    finally:
        cluster.stop()

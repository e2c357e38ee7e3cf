"""A node killed with -9 and restarted inside a test module (`Cluster.kill` then
`Cluster.restart`): it comes back on its ports and data, rejoins the quorum and the ISR, serves
what was acknowledged before and while it was down, and later tests of the module get the
cluster whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.api.client import Consumer, Producer, TopicPartition
from harness import REPLICATION_OVERRIDES, Cluster, partition_state, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(Path(tmp_path_factory.mktemp("restart-after-kill")), 3, combined=True, overrides=REPLICATION_OVERRIDES)
    try:
        yield c.start()
    finally:
        c.stop()


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    with Consumer(bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=30_000) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        values: list[bytes] = []
        for record in consumer:
            values.append(record.value)
            if len(values) == count:
                break
        return values


def test_restart_after_kill_rejoins_and_serves_what_was_acknowledged(cluster: Cluster):
    cluster.create_topic("restarted", 1, 3)
    wait_for(lambda: len(partition_state(cluster, 1, "restarted")["isr"]) == 3, 60, what="a full ISR")
    bootstrap = ",".join(n.bootstrap for n in cluster.running())
    with Producer(bootstrap, acks="all") as producer:
        producer.send("restarted", b"before", partition=0).get(60)
        victim = partition_state(cluster, 1, "restarted")["leader"]
        cluster.kill(victim)
        assert not cluster.node(victim).running
        producer.send("restarted", b"while down", partition=0).get(60)

    cluster.restart(victim)
    cluster.wait_ready()
    wait_for(lambda: len(partition_state(cluster, victim, "restarted")["isr"]) == 3, 60,
             what="the restarted node back in the ISR")
    assert read_all(cluster.node(victim).bootstrap, "restarted", 2) == [b"before", b"while down"]


def test_the_module_cluster_is_whole_after_the_restart(cluster: Cluster):
    assert len(cluster.running()) == 3
    active = cluster.wait_ready()
    assert active in cluster.voter_ids
    cluster.create_topic("after-restart", 1, 3)
    wait_for(lambda: len(partition_state(cluster, 2, "after-restart")["isr"]) == 3, 60, what="a full ISR")

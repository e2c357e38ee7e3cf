"""confluent-kafka's idempotent producer through a partition leader's kill -9 (issue 23): 3 real
nodes, RF 3, min.insync.replicas 2, acks=all; a numbered sequence is produced while the leader is
killed with records in flight, and read back from the survivors: every number once, in order."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness import REPLICATION_OVERRIDES, Cluster, partition_state, wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

TOPIC = "numbered"
COUNT = 6000
IN_FLIGHT = 500  # produced and not yet acknowledged when the leader dies, at most


@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_idempotent_producer_through_a_leader_kill_writes_no_duplicate_and_no_gap(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=REPLICATION_OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, 1, 3)
        wait_for(lambda: len(partition_state(cluster, 1, TOPIC)["isr"]) == 3, 60, what="the full ISR")
        leader = partition_state(cluster, 1, TOPIC)["leader"]
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        delivered: list[int] = []
        failures: list[object] = []

        def report(err: object, message: object) -> None:
            if err is not None:
                failures.append(err)
            else:
                delivered.append(int(message.value()))  # type: ignore[attr-defined]

        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "batch.num.messages": 100, "message.timeout.ms": 180_000})
        killed_at = None
        for i in range(COUNT):
            while i - len(delivered) - len(failures) >= IN_FLIGHT:
                producer.poll(0.01)
            producer.produce(TOPIC, value=b"%d" % i, partition=0, on_delivery=report)
            producer.poll(0)
            if killed_at is None and len(delivered) >= COUNT // 3:
                cluster.kill(leader)
                killed_at = (len(delivered), i + 1)
        assert producer.flush(180) == 0
        assert killed_at is not None and killed_at[0] < killed_at[1], killed_at  # records were in flight
        assert not failures, failures[:5]
        assert sorted(delivered) == list(range(COUNT))

        survivors = ",".join(n.bootstrap for n in cluster.running())
        new_leader = wait_for(lambda: _new_leader(cluster, leader), 60, what="a new leader")
        consumer = Consumer({"bootstrap.servers": survivors, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read: list[int] = []
        deadline = time.monotonic() + 120
        try:
            while len(read) < COUNT and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    read.append(int(message.value()))
            assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1] == COUNT, new_leader
        finally:
            consumer.close()
        assert read == list(range(COUNT))  # no duplicate, no gap, in order


def _new_leader(cluster: Cluster, old: int) -> int | None:
    via = cluster.running()[0].node_id
    leader = partition_state(cluster, via, TOPIC)["leader"]
    return leader if leader not in (old, -1, None) else None

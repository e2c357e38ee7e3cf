"""Consumer groups on a 3-node cluster (real processes, `__consumer_offsets` with replication
factor 3): partitions rebalance with no partition ever owned by two members, the CLI's describe
shows log end offset and lag of partitions led by other brokers than the coordinator, and kill -9
of the coordinator's broker keeps every committed offset: a new coordinator takes over and
consumption resumes from the committed offsets with no gap."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from kraft.api.client import Admin, Consumer, Producer, TopicPartition
from tests.harness import Cluster, evenly_assigned, wait_for

pytestmark = pytest.mark.cluster

KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]
SESSION_MS = 3000
OVERRIDES = {
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 6,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.heartbeat.interval.ms": 200,
    "replica.fetch.wait.max.ms": 200,
    "replica.lag.time.max.ms": 3000,
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 300,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    c = Cluster(Path(tmp_path_factory.mktemp("groups-cluster")), 3, combined=True, overrides=OVERRIDES)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def bootstrap(cluster: Cluster) -> str:
    return ",".join(n.bootstrap for n in cluster.running())


def new_topic(cluster: Cluster, partitions: int, per_partition: list[int]) -> str:
    """A topic with replication factor 3 and `per_partition[p]` records in partition p."""
    topic = f"gc-{uuid.uuid4().hex[:8]}"
    node = cluster.running()[0]

    def created() -> bool:
        # INVALID_REPLICATION_FACTOR is transient while a restarted broker is still fenced
        r = requests.post(f"{node.url}/v1/topics", json={"name": topic, "partitions": partitions,
                                                          "replication_factor": 3}, timeout=30)
        assert r.status_code == 201 or r.json()["error_code"] == "INVALID_REPLICATION_FACTOR", r.text
        return r.status_code == 201
    wait_for(created, 60, what=f"{topic} created with replication factor 3")
    cluster.wait_for_metadata(lambda m: any(t["name"] == topic and all(p["leader"] > 0 for p in t["partitions"])
                                            for t in m["topics"]), what=f"{topic} has leaders everywhere")
    with Producer(bootstrap(cluster), acks="all") as producer:
        for p, count in enumerate(per_partition):
            for i in range(count):
                producer.send(topic, value=f"{p}-{i}".encode(), partition=p)
        producer.flush()
    return topic


def consumer(cluster: Cluster, group: str, **kw) -> Consumer:
    kw.setdefault("auto_offset_reset", "earliest")
    return Consumer(bootstrap(cluster), group_id=group, fetch_max_wait_ms=50, **kw)


def coordinator_of(cluster: Cluster, group: str) -> int:
    node = cluster.running()[0]
    answer = requests.get(f"{node.url}/v1/groups/{group}/coordinator", timeout=20).json()
    return int(answer["coordinator"]["node_id"])


def leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    [t] = cluster.metadata(cluster.running()[0].node_id, topic)["topics"]
    return {p["partition"]: p["leader"] for p in t["partitions"]}


def test_rebalance_never_gives_a_partition_two_owners(cluster):
    topic = new_topic(cluster, 6, [5] * 6)
    group = f"split-{uuid.uuid4().hex[:6]}"
    all_tps = {TopicPartition(topic, p) for p in range(6)}
    active: list[Consumer] = []

    a, b = consumer(cluster, group), consumer(cluster, group)
    active += [a, b]
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        wait_for(lambda: evenly_assigned(active, all_tps), 30, what="two consumers split 6 partitions")
        c = consumer(cluster, group)
        active.append(c)
        c.subscribe([topic])
        wait_for(lambda: evenly_assigned(active, all_tps), 30, what="a third consumer gets its share")
    finally:
        for x in active:
            x.close()


def test_describe_shows_log_end_and_lag_of_partitions_led_elsewhere(cluster):
    counts = [3, 5, 7, 9, 11, 13]
    topic = new_topic(cluster, 6, counts)
    group = f"lag-{uuid.uuid4().hex[:6]}"
    c = consumer(cluster, group, enable_auto_commit=False, client_id="lag-client")
    try:
        c.subscribe([topic])
        wait_for(lambda: c.poll(20) is not None and len(c.assignment()) == 6, 30, what="assignment")
        committed = {p: p for p in range(6)}  # partition p committed at offset p
        c.commit({TopicPartition(topic, p): o for p, o in committed.items()})
        coordinator = coordinator_of(cluster, group)
        led_elsewhere = [p for p, leader in leaders(cluster, topic).items() if leader != coordinator]
        assert led_elsewhere, "placement put every leader on the coordinator: nothing to check"
        proc = subprocess.run(KRAFT + ["consumer-groups", "--bootstrap-server", bootstrap(cluster),
                                       "--describe", "--group", group],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        lines = proc.stdout.strip().splitlines()
        assert lines[0].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
        rows = {int(line.split()[2]): line.split() for line in lines[1:]}
        assert sorted(rows) == list(range(6))
        for p in range(6):
            assert rows[p][3:6] == [str(committed[p]), str(counts[p]), str(counts[p] - committed[p])], rows[p]
    finally:
        c.close()
    with Admin(bootstrap(cluster)) as admin:  # resets read the leaders' offsets too
        admin.reset_group_offsets(group, [topic], "latest", dry_run=False)
        assert admin.list_group_offsets(group) == {TopicPartition(topic, p): n for p, n in enumerate(counts)}
        admin.reset_group_offsets(group, [topic], "datetime", 0, dry_run=False)
        assert admin.list_group_offsets(group) == {TopicPartition(topic, p): 0 for p in range(6)}


def test_kill_coordinator_keeps_commits_and_consumption_resumes_without_gap(cluster):
    counts = [30, 30, 30]
    topic = new_topic(cluster, 3, counts)
    group = f"resume-{uuid.uuid4().hex[:6]}"
    first = consumer(cluster, group, enable_auto_commit=False, max_poll_records=4)
    first.subscribe([topic])
    read_by_first: dict[int, int] = {}

    def read_some() -> bool:
        for tp, records in first.poll(20).items():
            read_by_first[tp.partition] = records[-1].offset + 1
        return len(first.assignment()) == 3 and all(read_by_first.get(p, 0) >= 5 + p for p in range(3))
    wait_for(read_some, 30, what="the first consumer reads from every partition")
    # it commits part of what it read (polls may have read a partition to its end)
    first.commit({TopicPartition(topic, p): 5 + p for p in range(3)})
    committed = {tp.partition: first.committed(tp) for tp in first.assignment()}
    assert committed == {p: 5 + p for p in range(3)}
    coordinator = coordinator_of(cluster, group)
    first._stop_heartbeats()  # the consumer "crashes": no leave, no further heartbeat
    cluster.kill(coordinator)

    survivors = [n.node_id for n in cluster.running()]
    new_coordinator = wait_for(lambda: (c := coordinator_of(cluster, group)) != coordinator and c in survivors and c,
                               30, what="a new coordinator")
    assert new_coordinator != coordinator
    second = consumer(cluster, group)
    try:
        offsets = wait_for(lambda: second._require_group()[0].committed(TopicPartition(topic, p) for p in range(3)),
                           30, what="committed offsets from the new coordinator")
        assert {tp.partition: o for tp, o in offsets.items()} == committed
        second.subscribe([topic])
        first_seen: dict[int, int] = {}
        seen: dict[int, list[int]] = {p: [] for p in range(3)}

        def read_rest() -> bool:
            for tp, records in second.poll(20).items():
                first_seen.setdefault(tp.partition, records[0].offset)
                seen[tp.partition] += [r.offset for r in records]
            return all(len(seen[p]) >= counts[p] - committed[p] for p in range(3))
        # the new coordinator gave the crashed member a fresh session: second waits it out
        wait_for(read_rest, SESSION_MS / 1000 + 30, what="the second consumer reads the rest")
        assert first_seen == committed  # resumes exactly at the committed offsets
        for p in range(3):
            assert seen[p] == list(range(committed[p], counts[p]))  # no gap, no duplicate
    finally:
        second.close()


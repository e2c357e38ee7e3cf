"""Transactions on a 3-node cluster (real processes): the coordinator reaches partition leaders on
other brokers (KIP-890 verification and markers over the node-only routes, signed with the node
credential), and kill -9 of the coordinator after the prepare leaves the commit to the broker that
takes over `__transaction_state`'s partition, which sends the markers again: the transaction over
three partitions and its group offset are all-or-nothing throughout."""

from __future__ import annotations

import pytest

from harness import Cluster, wait_for
from kraft.api.client import Admin, Consumer, Producer, TopicPartition
from kraft.api.client.types import NewTopic
from kraft.api.errors import KraftError

pytestmark = pytest.mark.cluster

OVERRIDES = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 300,
             "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
             "min.insync.replicas": 1}
TID = "ledger-writer"
PARTITIONS = 3


def committed_values(bootstrap: str | list[str], topic: str) -> list[str]:
    consumer = Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        values: list[str] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(1000).values():
                values += [r.value.decode() for r in records]
        return sorted(values)
    finally:
        consumer.close(autocommit=False)


def group_offset(bootstrap: str | list[str], group: str, topic: str) -> int | None:
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close(autocommit=False)


def servers(cluster: Cluster, but: int | None = None) -> list[str]:
    return [n.bootstrap for i, n in cluster.nodes.items() if i != but]


def state(bootstrap: str | list[str]) -> str | None:
    try:
        with Admin(bootstrap, api_timeout_ms=5000) as admin:
            return admin.describe_transactions([TID])[TID]["state"]
    except KraftError:
        return None


def test_a_commit_survives_the_coordinators_kill_9_after_the_prepare(tmp_path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        with Admin(servers(cluster)) as admin:
            admin.create_topics([NewTopic("ledger", PARTITIONS, 3)])
        p = Producer(servers(cluster), transactional_id=TID, linger_ms=0, max_block_ms=60_000)
        p.init_transactions()
        p.begin_transaction()
        for i in range(PARTITIONS):  # leaders spread over the brokers: remote verification too
            p.send("ledger", f"entry-{i}".encode(), partition=i).get(timeout=30)
        p.send_offsets_to_transaction({TopicPartition("ledger", 0): 3}, "auditors")
        assert committed_values(servers(cluster), "ledger") == []
        with Admin(servers(cluster)) as admin:
            coordinator = admin.metadata(["__transaction_state"])
        leader = next(t for t in coordinator["topics"] if t["name"] == "__transaction_state")["partitions"][0]["leader"]
        p._txn.end(commit=True)  # EndTxn answered: PrepareCommit is logged on the coordinator
        cluster.kill(leader)
        p.close(timeout=0)
        alive = servers(cluster, but=leader)
        wait_for(lambda: state(alive) == "CompleteCommit", 90, what="the new coordinator to finish the commit")
        assert committed_values(alive, "ledger") == [f"entry-{i}" for i in range(PARTITIONS)]
        assert group_offset(alive, "auditors", "ledger") == 3

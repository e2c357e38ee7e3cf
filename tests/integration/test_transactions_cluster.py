"""Transactions on a 3-node cluster (real processes): the coordinator reaches partition leaders on
other brokers (KIP-890 verification and markers over the node-only routes, signed with the node
credential), and kill -9 of the coordinator after the prepare leaves the commit to the broker that
takes over `__transaction_state`'s partition, which sends the markers again: the transaction over
three partitions and its group offset are all-or-nothing throughout."""

from __future__ import annotations

import pytest

from harness import Cluster, wait_for
from kraft.api.client import Admin, Producer, TopicPartition
from kraft.api.client.types import NewTopic
from kraft.api.errors import KraftError
from transactions_support import committed_values, group_offset

pytestmark = pytest.mark.cluster

OVERRIDES = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 300,
             "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
             "min.insync.replicas": 1}
TID = "ledger-writer"
PARTITIONS = 3


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
        assert committed_values(servers(cluster), "ledger", PARTITIONS) == []
        with Admin(servers(cluster)) as admin:
            coordinator = admin.metadata(["__transaction_state"])
        leader = next(t for t in coordinator["topics"] if t["name"] == "__transaction_state")["partitions"][0]["leader"]
        p._txn.end(commit=True)  # EndTxn answered: PrepareCommit is logged on the coordinator
        cluster.kill(leader)
        p.close(timeout=0)
        alive = servers(cluster, but=leader)
        wait_for(lambda: state(alive) == "CompleteCommit", 90, what="the new coordinator to finish the commit")
        assert committed_values(alive, "ledger", PARTITIONS) == [f"entry-{i}" for i in range(PARTITIONS)]
        assert group_offset(alive, "auditors", "ledger") == 3

"""Transactions on a 3-node cluster (real processes): the coordinator reaches partition leaders on
other brokers (KIP-890 verification and markers over the node-only routes, signed with the node
credential). kill -9 of the coordinator after the prepare leaves the commit to the broker that
takes over `__transaction_state`'s partition, which sends the markers again; kill -9 of a
partition's leader between the markers leaves that partition's marker to its new leader: the
transaction over three partitions and its group offset are all-or-nothing throughout. A partition
whose leader changes between AddPartitionsToTxn and the transaction's first batch there (a
preferred election, a kill -9) gets the coordinator's verification again at its new leader: the
transaction commits (KIP-890)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pytest

from harness import Cluster, wait_for
from kraft.api.client import Admin, Producer, TopicPartition
from kraft.api.client.types import NewTopic
from kraft.api.errors import KraftError
from transactions_support import committed_values, group_offset, stable

pytestmark = pytest.mark.cluster

OVERRIDES = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 300,
             "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
             "min.insync.replicas": 1}
TID = "ledger-writer"
PARTITIONS = 3


def leaders(bootstrap: str | list[str], topic: str) -> dict[int, int]:
    """Partition -> leader id of `topic`."""
    with Admin(bootstrap) as admin:
        meta = admin.metadata([topic])
    return {p["partition"]: p["leader"] for t in meta["topics"] if t["name"] == topic for p in t["partitions"]}


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


def test_a_partition_leader_killed_9_between_the_markers_gets_its_marker_from_the_new_leader(tmp_path) -> None:
    """The leader of one partition is stopped (SIGSTOP) before EndTxn, so its marker cannot be
    written, while the others' are (it leaves their ISRs after `replica.lag.time.max.ms`); once a
    marker is visible elsewhere it is killed -9. Its partition's new leader (an ISR member, which
    holds the transaction's record and its open transaction) takes the marker: the transaction
    commits everywhere and every last stable offset reaches the high watermark."""
    overrides = {**OVERRIDES, "replica.lag.time.max.ms": 1500,
                 "broker.session.timeout.ms": 8000}  # the kill usually lands before the stopped node is fenced
    with Cluster(tmp_path, controllers=3, combined=True, overrides=overrides) as cluster:
        cluster.start()
        with Admin(servers(cluster)) as admin:
            admin.create_topics([NewTopic("ledger", PARTITIONS, 3)])
        cluster.wait_full_isr(["ledger"])
        p = Producer(servers(cluster), transactional_id=TID, linger_ms=0, max_block_ms=60_000)
        p.init_transactions()
        p.begin_transaction()
        for i in range(PARTITIONS):
            p.send("ledger", f"entry-{i}".encode(), partition=i).get(timeout=30)
        p.send_offsets_to_transaction({TopicPartition("ledger", 0): 3}, "auditors")
        coordinator = leaders(servers(cluster), "__transaction_state")[0]
        led = leaders(servers(cluster), "ledger")
        victim = next(leader for leader in led.values() if leader != coordinator)  # not the coordinator
        others = [i for i, leader in led.items() if leader != victim]
        assert others, f"one node leads every partition: {led}"
        cluster.pause(victim)
        p._txn.end(commit=True)  # EndTxn answered: PrepareCommit is logged; the markers follow
        alive = servers(cluster, but=victim)
        wait_for(lambda: committed_values(alive, "ledger", others) == [f"entry-{i}" for i in others], 60,
                 what="a marker on a partition the stopped node does not lead")
        cluster.kill(victim)
        p.close(timeout=0)
        wait_for(lambda: state(alive) == "CompleteCommit", 120, what="the markers at the new leaders")
        assert victim not in leaders(alive, "ledger").values()
        wait_for(lambda: stable(alive, "ledger", PARTITIONS), 30, what="every last stable offset at the high watermark")
        assert committed_values(alive, "ledger", PARTITIONS) == [f"entry-{i}" for i in range(PARTITIONS)]
        assert group_offset(alive, "auditors", "ledger") == 3


def begin(cluster: Cluster) -> Producer:
    p = Producer(servers(cluster), transactional_id=TID, linger_ms=0, max_block_ms=60_000)
    p.init_transactions()
    p.begin_transaction()
    return p


def add_partition(p: Producer) -> None:
    """AddPartitionsToTxn for `ledger-0` (its leader holds the verification), no batch there yet."""
    p._txn.add_partitions([TopicPartition("ledger", 0)])


def move_leadership(cluster: Cluster) -> int:
    """A preferred election moves `ledger-0`'s leadership to another replica (the same replicas
    reordered first); the new leader."""
    tp = TopicPartition("ledger", 0)
    with Admin(servers(cluster)) as admin:
        [info] = admin.describe_topic("ledger").partitions
        reordered = [r for r in info.replicas if r != info.leader] + [info.leader]
        admin.alter_partition_reassignments({tp: reordered})
        wait_for(lambda: list(admin.describe_topic("ledger").partitions[0].replicas) == reordered, 30,
                 what="the new replica order")
        assert [r.get("error_code") for r in admin.elect_leaders("preferred", [tp])] == [None]
    wait_for(lambda: leaders(servers(cluster), "ledger")[0] == reordered[0], 30, what="the new leader")
    return reordered[0]


def commit_one_record(p: Producer, alive: list[str]) -> None:
    p.send("ledger", b"after-the-move", partition=0).get(timeout=60)
    p.commit_transaction()
    p.close()
    wait_for(lambda: state(alive) == "CompleteCommit", 60, what="the commit")
    assert committed_values(alive, "ledger", 1) == ["after-the-move"]


@contextmanager
def one_partition_ledger(tmp_path) -> Iterator[Cluster]:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        with Admin(servers(cluster)) as admin:
            admin.create_topics([NewTopic("ledger", 1, 3)])
        cluster.wait_full_isr(["ledger"])
        yield cluster


def test_a_preferred_election_between_add_partitions_and_the_first_batch_keeps_the_transaction(tmp_path) -> None:
    with one_partition_ledger(tmp_path) as cluster:
        p = begin(cluster)
        add_partition(p)
        move_leadership(cluster)
        commit_one_record(p, servers(cluster))


def test_a_leader_killed_9_between_add_partitions_and_the_first_batch_keeps_the_transaction(tmp_path) -> None:
    with one_partition_ledger(tmp_path) as cluster:
        p = begin(cluster)  # creates __transaction_state: its leader is the coordinator
        victim = leaders(servers(cluster), "ledger")[0]
        if victim == leaders(servers(cluster), "__transaction_state")[0]:
            victim = move_leadership(cluster)  # this test is about the partition's leader alone
        add_partition(p)
        cluster.kill(victim)
        alive = servers(cluster, but=victim)
        wait_for(lambda: leaders(alive, "ledger")[0] not in (victim, -1, None), 30, what="a new leader")
        commit_one_record(p, alive)

"""Replication with real `kraft-node` processes (RF 3, min.insync.replicas 2, acks=all producers
with retries): kill -9 the leader, SIGSTOP a leader past the session timeout (acks must go on
while it is paused) and wake it, kill and restart another node. Afterwards every acknowledged record is at its offset, no consumer saw an
offset that was later truncated, and the replicas' logs are identical byte for byte up to the high
watermark. The short round runs in the normal suite (`cluster`); `slow` loops rounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from kraft.api.cli import main as cli_main
from kraft.bench.chaos.clients import AckedProducer, WatchingConsumer, audit, read_partition
from tests.harness import (
    REPLICATION_OVERRIDES, Cluster, partition_offsets, partition_state, raw_log, wait_for,
)

pytestmark = pytest.mark.spread  # a cluster per test

TOPIC = "chaos"
OVERRIDES = REPLICATION_OVERRIDES


def running_ids(cluster: Cluster) -> list[int]:
    return [n.node_id for n in cluster.running()]


def wait_leader(cluster: Cluster, not_in: tuple[int, ...] = (), timeout: float = 30) -> int:
    """The leader every running node agrees on, once it is none of `not_in`."""
    def agreed() -> int | None:
        leaders = {partition_state(cluster, i, TOPIC)["leader"] for i in running_ids(cluster)
                   if i not in not_in}
        leader = leaders.pop() if len(leaders) == 1 else -1
        return leader if leader > 0 and leader not in not_in else None
    return wait_for(agreed, timeout, what=f"a partition leader other than {not_in}")


def wait_full_isr(cluster: Cluster, timeout: float = 60) -> None:
    wait_for(lambda: all(sorted(partition_state(cluster, i, TOPIC)["isr"]) == [1, 2, 3]
                         for i in running_ids(cluster)), timeout, what="ISR back to [1, 2, 3]")


def chaos_round(cluster: Cluster, producer: AckedProducer, round_no: int) -> dict[bytes, int]:
    """One round of faults; returns what a second producer, pinned to the node paused in the
    round, got acknowledged (for the audit)."""
    leader = wait_leader(cluster)
    producer.wait_acked_more(100, 60)
    cluster.kill(leader)  # kill -9 the leader
    second = wait_leader(cluster, not_in=(leader,))
    producer.wait_acked_more(100, 60)
    cluster.restart(leader)
    wait_full_isr(cluster)
    # A producer whose preferred server is the node about to be paused: its requests there time
    # out, and its metadata refreshes must move to a live node to find the new leader without
    # waiting for the old one to wake.
    first = [cluster.node(second).bootstrap] + [cluster.node(i).bootstrap for i in (1, 2, 3) if i != second]
    pinned = AckedProducer(",".join(first), TOPIC, prefix=b"pinned-%d" % round_no).start()
    try:
        pinned.wait_acked_more(10, 60)
        cluster.pause(second)  # SIGSTOP past the session timeout: fenced, leadership moves
        try:
            third = wait_leader(cluster, not_in=(second,))
            producer.wait_acked_more(100, 45)
            pinned.wait_acked_more(100, 45)
        finally:
            cluster.resume(second)  # wakes up believing it leads: must not serve or ack stale data
    finally:
        pinned.stop()
    producer.wait_acked_more(100, 60)
    wait_full_isr(cluster)
    other = next(i for i in (1, 2, 3) if i != third)
    cluster.kill(other)  # a follower this time
    producer.wait_acked_more(100, 60)
    cluster.restart(other)
    wait_full_isr(cluster)
    return pinned.acked


def run_chaos(tmp_path: Path, rounds: int) -> None:
    cluster = Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES)
    with cluster:
        cluster.start()
        cluster.create_topic(TOPIC, 1, 3)
        wait_full_isr(cluster)
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        producer = AckedProducer(bootstrap, TOPIC).start()
        consumer = WatchingConsumer(bootstrap, TOPIC).start()
        pinned_acked: dict[bytes, int] = {}
        try:
            for round_no in range(rounds):
                pinned_acked |= chaos_round(cluster, producer, round_no)
        finally:
            producer.stop()
            consumer.stop()
        wait_full_isr(cluster)
        leader = wait_leader(cluster)
        high_watermark = wait_for(
            lambda: (o := partition_offsets(cluster.node(leader), TOPIC))["high_watermark"] == o["log_end_offset"]
            and o["high_watermark"], 30, what="the high watermark at the log end")
        report = audit(producer.acked | pinned_acked, read_partition(bootstrap, TOPIC, 0, high_watermark),
                       consumer.seen)
        assert report.acked >= 500 * rounds, report
        assert report.lost == 0, report
        assert report.truncated_seen == 0, report
        assert report.log_records == high_watermark  # one record per offset, no gaps
        assert len(consumer.seen) > 0
        cluster.stop()  # clean shutdown: checkpoints written, logs comparable on disk
    raw = [raw_log(cluster.node(i).data_dir / f"{TOPIC}-0", high_watermark) for i in (1, 2, 3)]
    assert raw[0] == raw[1] == raw[2] and raw[0]


@pytest.mark.cluster
@pytest.mark.timeout(180)
def test_no_acknowledged_write_lost_across_leader_failures(tmp_path: Path) -> None:
    run_chaos(tmp_path, rounds=1)


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.timeout(1800)
def test_no_acknowledged_write_lost_looped(tmp_path: Path) -> None:
    run_chaos(tmp_path, rounds=int(os.environ.get("KRAFT_CHAOS_ROUNDS", "5")))


def describe(cluster: Cluster, via: int, *flags: str) -> list[str]:
    result = CliRunner().invoke(cli_main, ["topics", "--describe", "--topic", TOPIC, *flags,
                                           "--bootstrap-server", cluster.node(via).bootstrap])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_isr_shrink_and_expand_show_in_describe(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, 1, 3)
        wait_full_isr(cluster)
        leader = wait_leader(cluster)
        assert describe(cluster, leader, "--under-replicated-partitions") == []
        follower = next(i for i in (1, 2, 3) if i != leader)
        cluster.pause(follower)  # alive to the controller for a while: the leader shrinks the ISR
        wait_for(lambda: follower not in partition_state(cluster, leader, TOPIC)["isr"], 30,
                 what=f"broker {follower} out of the ISR")
        [line] = describe(cluster, leader, "--under-replicated-partitions")
        assert f"Leader: {leader}\t" in line
        assert str(follower) not in line.split("Isr: ")[1]
        assert describe(cluster, leader, "--under-min-isr-partitions") == []  # 2 in sync, min 2
        cluster.resume(follower)
        wait_full_isr(cluster)
        assert describe(cluster, leader, "--under-replicated-partitions") == []


def fetch_follower_requests(cluster: Cluster, node_id: int) -> tuple[float, float]:
    """The FetchFollower request count and the count of its total-time histogram on a node."""
    text = requests.get(f"{cluster.node(node_id).url}/metrics", timeout=10).text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    label = (("request", "FetchFollower"),)
    return (samples.get(("kafka_network_requestmetrics_requests_total", label), 0.0),
            samples.get(("kafka_network_requestmetrics_totaltimems_count", label), 0.0))


def test_each_replica_fetch_over_the_channel_counts_as_a_fetch_follower_request(tmp_path: Path) -> None:
    """Followers fetch over their replication channel (no HTTP request per fetch), and the leader
    counts each of those fetches as one FetchFollower request, its time too, as Kafka counts every
    follower fetch (none was counted once fetches moved to the channel)."""
    with Cluster(tmp_path, controllers=3, combined=True, overrides=OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, 1, 3)
        wait_full_isr(cluster)
        leader = wait_leader(cluster)
        first, _ = wait_for(lambda: (c := fetch_follower_requests(cluster, leader))[0] > 0 and c, 30,
                            what="FetchFollower requests counted on the leader")
        # the followers keep long-polling: the count goes on growing, each with its time
        count, timed = wait_for(lambda: (c := fetch_follower_requests(cluster, leader))[0] > first + 2 and c, 60,
                                what="more FetchFollower requests")
        assert timed == count

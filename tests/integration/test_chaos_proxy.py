"""The chaos harness's link proxies on a real 3-node cluster: nodes reach each other only through
them, each connection is attributed to the node that opened it, and cutting the one link from a
follower to its leader drops that follower from the ISR until the link is healed, while clients
(never cut) keep producing.

As in Kafka, a follower whose log end offset equals the leader's is in sync however long ago it
last fetched (an idle partition never shrinks its ISR: `leader.FollowerState.is_caught_up`), so
the cut follower falls out of sync only once the leader appends something it cannot fetch. The
test makes that the case every time: the follower has fetched everything before the cut (an
acks=all record is committed on all three), and a record produced after the cut is what it lags
behind. (Before, nothing was produced until the follower had left the ISR: that happened only
when the cut beat the follower's first fetch, or when the leader was also the active controller
and the follower got fenced for missed heartbeats; otherwise the test timed out.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from kraft.api.client import Admin, Producer
from harness import wait_for
from kraft.bench.chaos.proxy import LinkProxies
from kraft.bench.cluster import LocalCluster

pytestmark = pytest.mark.cluster

OVERRIDES = {"min.insync.replicas": 2, "replica.lag.time.max.ms": 2000, "replica.fetch.wait.max.ms": 200,
             "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300}


def isr(cluster: LocalCluster, node_id: int, topic: str) -> tuple[int, list[int]]:
    """(leader, sorted ISR) of partition 0 in node `node_id`'s metadata."""
    [found] = requests.get(f"{cluster.nodes[node_id].url}/v1/metadata", params={"topics": topic},
                           timeout=5).json()["topics"]
    partition = found["partitions"][0]
    return partition["leader"], sorted(partition["isr"])


def isrs(cluster: LocalCluster, topic: str) -> dict[int, list[int]]:
    """Each node's view of the ISR. The cut link may carry the Raft connection between the two
    nodes (one connection per pair, opened by one side), so one of them may see the metadata
    late: the committed change is what any node shows, and healed is what every node shows."""
    return {i: isr(cluster, i, topic)[1] for i in cluster.nodes}


def test_cutting_a_follower_to_leader_link_shrinks_the_isr_and_healing_restores_it(tmp_path: Path):
    cluster: LocalCluster | None = None
    proxies = LinkProxies(lambda: {n.proc.pid: i for i, n in cluster.nodes.items()  # type: ignore[union-attr]
                                   if n.proc is not None and n.proc.poll() is None})
    cluster = LocalCluster(3, combined=True, overrides=OVERRIDES, root=tmp_path, proxies=proxies)
    try:
        with cluster, Producer(cluster.bootstrap, acks="all", request_timeout_ms=10_000) as all_isr, \
                Producer(cluster.bootstrap, acks=1, request_timeout_ms=10_000) as leader_only:
            with Admin(cluster.bootstrap) as admin:
                admin.create_topic("cut", 1, 3)
            leader, _ = wait_for(lambda: (s := isr(cluster, 1, "cut"))[1] == [1, 2, 3] and s, 60, what="a full ISR")
            follower = next(i for i in cluster.nodes if i != leader)
            # committed with the ISR of three: every follower fetched up to the leader's log end,
            # so from here on the cut follower is in sync until the leader appends past it
            all_isr.send("cut", b"before the cut", partition=0).get(60)
            wait_for(lambda: isr(cluster, leader, "cut") == (leader, [1, 2, 3]), 60,
                     what="the follower in the ISR at the cut")

            proxies.cut(follower, leader)
            # the follower's fetches reach the leader through the leader's proxy, attributed to it
            wait_for(lambda: proxies.connections.get((follower, leader), 0) > 0, 30, what="an attributed connection")
            # a record the cut follower cannot fetch: it lags from now on (clients are never cut)
            leader_only.send("cut", b"the follower lags behind this", partition=0).get(60)
            wait_for(lambda: any(follower not in s for s in isrs(cluster, "cut").values()), 60,
                     what="the cut follower out of the ISR")
            all_isr.send("cut", b"while cut", partition=0).get(60)  # committed by the two left

            proxies.heal(follower, leader)
            wait_for(lambda: all(s == [1, 2, 3] for s in isrs(cluster, "cut").values()), 60,
                     what="the healed follower back in the ISR on every node")
    finally:
        proxies.close()

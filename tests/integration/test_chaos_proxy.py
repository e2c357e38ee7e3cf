"""The chaos harness's link proxies on a real 3-node cluster: nodes reach each other only through
them, each connection is attributed to the node that opened it, and cutting the one link from a
follower to its leader drops that follower from the ISR until the link is healed, while clients
(never cut) keep producing."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from api.client import Admin, Producer
from harness import wait_for
from kraft.bench.chaos.proxy import LinkProxies
from kraft.bench.cluster import LocalCluster

pytestmark = pytest.mark.cluster

OVERRIDES = {"min.insync.replicas": 2, "replica.lag.time.max.ms": 2000, "replica.fetch.wait.max.ms": 200,
             "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300}


def isr(cluster: LocalCluster, topic: str) -> tuple[int, list[int]]:
    [found] = requests.get(f"{cluster.nodes[1].url}/v1/metadata", params={"topics": topic}, timeout=5).json()["topics"]
    partition = found["partitions"][0]
    return partition["leader"], sorted(partition["isr"])


def test_cutting_a_follower_to_leader_link_shrinks_the_isr_and_healing_restores_it(tmp_path: Path):
    cluster: LocalCluster | None = None
    proxies = LinkProxies(lambda: {n.proc.pid: i for i, n in cluster.nodes.items()  # type: ignore[union-attr]
                                   if n.proc is not None and n.proc.poll() is None})
    cluster = LocalCluster(3, combined=True, overrides=OVERRIDES, root=tmp_path, proxies=proxies)
    try:
        with cluster:
            with Admin(cluster.bootstrap) as admin:
                admin.create_topic("cut", 1, 3)
            leader, _ = wait_for(lambda: (s := isr(cluster, "cut"))[1] == [1, 2, 3] and s, 60, what="a full ISR")
            follower = next(i for i in cluster.nodes if i != leader)

            proxies.cut(follower, leader)
            # the follower's fetches reach the leader through the leader's proxy, attributed to it
            wait_for(lambda: proxies.connections.get((follower, leader), 0) > 0, 30, what="an attributed connection")
            wait_for(lambda: follower not in isr(cluster, "cut")[1], 60, what="the cut follower out of the ISR")
            with Producer(cluster.bootstrap, acks="all", request_timeout_ms=10_000) as producer:
                producer.send("cut", b"while cut", partition=0).get(60)  # clients are never cut off

            proxies.heal(follower, leader)
            wait_for(lambda: isr(cluster, "cut")[1] == [1, 2, 3], 60, what="the healed follower back in the ISR")
    finally:
        proxies.close()

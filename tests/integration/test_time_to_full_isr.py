"""Time back to full ISR after kill -9 of one node of three (issue 26), measured by the harness:
the killed broker leaves every ISR, and once restarted it is back in every ISR (of a topic with
dozens of partitions, under acks=all produces) within seconds. One AlterPartition commit per
partition used to queue behind the others at the controller (tens of seconds on a loaded
machine); they now commit in groups. The goal is 10 s (docs/reliability.md); the bound here is
three times that, so a machine loaded by other work does not break the test."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kraft.api.client import KraftError, Producer
from harness import REPLICATION_OVERRIDES, Cluster, wait_for

pytestmark = pytest.mark.cluster

PARTITIONS = 30
GOAL_S = 10.0


def produce_until(stop: threading.Event, bootstrap: str, acked: list[int]) -> None:
    with Producer(bootstrap, acks="all", linger_ms=5, delivery_timeout_ms=60_000) as producer:
        n = 0
        while not stop.is_set():
            futures = [producer.send("isr", b"v%d" % (n + i), partition=(n + i) % PARTITIONS) for i in range(30)]
            for future in futures:
                try:
                    future.get(60)
                    acked.append(1)
                except KraftError:
                    pass
            n += 30
            stop.wait(0.05)


def test_a_restarted_broker_is_back_in_every_isr_within_seconds(tmp_path: Path):
    with Cluster(tmp_path, 3, combined=True, overrides=REPLICATION_OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic("isr", PARTITIONS, 3)
        cluster.wait_full_isr(["isr"])
        stop, acked = threading.Event(), []
        producer = threading.Thread(target=produce_until, args=(stop, cluster.node(1).bootstrap, acked))
        producer.start()
        try:
            wait_for(lambda: len(acked) > 100, 60, what="acknowledged writes")
            cluster.kill(3)
            cluster.wait_for_metadata(lambda m: all(3 not in p["isr"] for t in m["topics"] if t["name"] == "isr"
                                                    for p in t["partitions"]),
                                      timeout=60, what="the killed broker out of every ISR")
            before = len(acked)
            wait_for(lambda: len(acked) > before + 100, 60, what="writes acknowledged without it")
            cluster.node(3).start(wait=False)
            seconds = cluster.wait_full_isr(["isr"], timeout=120)
        finally:
            stop.set()
            producer.join(120)
        print(f"\ntime to full ISR after kill -9 and restart of one node of three "
              f"({PARTITIONS} partitions, acks=all load): {seconds:.1f} s (goal {GOAL_S:g} s)")
        assert seconds < 3 * GOAL_S

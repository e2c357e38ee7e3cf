"""A few thousand partitions created on a real cluster (1 controller, 2 broker-only nodes) while a
client keeps probing a broker's /v1/health: every probe is answered, every broker serves every
partition in the end, and the loop-lag histogram counted the probes of that time. The latencies
are printed (figures, not assertions: the machine is shared)."""

from __future__ import annotations

import threading
import time

import pytest
import requests

from harness import Cluster, wait_for

pytestmark = pytest.mark.cluster

TOPICS = 6
PARTITIONS_PER_TOPIC = 500


def loop_lag_count(node) -> float:
    text = requests.get(f"{node.url}/metrics", timeout=30).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("kraft_event_loop_lag_seconds_count"))


def partitions_seen(node) -> int:
    metadata = requests.get(f"{node.url}/v1/metadata", timeout=30).json()
    return sum(len(t["partitions"]) for t in metadata["topics"] if t["name"].startswith("bulk-"))


def test_health_probes_answer_while_thousands_of_partitions_are_created(tmp_path):
    with Cluster(tmp_path, controllers=1, brokers=2) as cluster:
        cluster.start()
        brokers = [cluster.node(i) for i in cluster.broker_ids]
        probed = brokers[0]
        lag_probes_before = loop_lag_count(probed)
        latencies: list[float] = []
        failures: list[BaseException] = []
        stop = threading.Event()

        def probe() -> None:
            session = requests.Session()
            while not stop.is_set():
                started = time.monotonic()
                try:
                    session.get(f"{probed.url}/v1/health", timeout=60).raise_for_status()
                except requests.RequestException as e:
                    failures.append(e)
                latencies.append(time.monotonic() - started)
                stop.wait(0.02)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        try:
            for i in range(TOPICS):
                r = requests.post(f"{probed.url}/v1/topics", timeout=120, json={
                    "name": f"bulk-{i}", "partitions": PARTITIONS_PER_TOPIC, "replication_factor": 1})
                assert r.status_code == 201, r.text
            total = TOPICS * PARTITIONS_PER_TOPIC
            for broker in brokers:
                wait_for(lambda b=broker: partitions_seen(b) == total, 120, what="every partition served")
        finally:
            stop.set()
            prober.join(60)
        assert not failures, failures[:3]
        assert latencies
        assert loop_lag_count(probed) > lag_probes_before
        latencies.sort()
        print(f"health probes: {len(latencies)}, p50 {latencies[len(latencies) // 2] * 1000:.0f} ms, "
              f"max {latencies[-1] * 1000:.0f} ms")

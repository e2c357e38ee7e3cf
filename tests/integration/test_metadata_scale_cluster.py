"""A few thousand partitions created on a real cluster (1 controller, 2 broker-only nodes) while a
client keeps probing a broker's /v1/health: every probe is answered, every broker serves every
partition in the end, and the loop-lag histogram counted the probes of that time. The latencies
are printed (figures, not assertions: the machine is shared). And a broker holding thousands of
RF 1 partitions holds far fewer descriptors than partitions (lazy logs, bounded file cache)."""

from __future__ import annotations

import os
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


LAZY_PARTITIONS = 3_000
WRITTEN = 600
OPEN_FILES_MAX = 64


def open_descriptors(node) -> int:
    return len(os.listdir(f"/proc/{node.proc.pid}/fd"))


def test_a_broker_with_thousands_of_partitions_holds_few_descriptors(tmp_path):
    """3,000 RF 1 partitions led by one broker: no descriptor and no file for the ones never
    written; 600 of them written still hold at most log.open.files.max segment descriptors
    (Kafka would hold 3 per partition: 9,000), and every written record reads back."""
    with Cluster(tmp_path, controllers=1, brokers=1,
                 overrides={"log.open.files.max": OPEN_FILES_MAX}) as cluster:
        cluster.start()
        broker = cluster.node(cluster.broker_ids[0])
        idle = open_descriptors(broker)
        r = requests.post(f"{broker.url}/v1/topics", timeout=120, json={
            "name": "lazy", "partitions": LAZY_PARTITIONS, "replication_factor": 1})
        assert r.status_code == 201, r.text
        wait_for(lambda: requests.get(f"{broker.url}/v1/topics/lazy/partitions/{LAZY_PARTITIONS - 1}/offsets",
                                      timeout=10).status_code == 200, 60, what="the last partition led")
        created = open_descriptors(broker)
        assert created - idle < 100, (idle, created)
        assert not list(broker.data_dir.glob("lazy-*"))
        r = requests.post(f"{broker.url}/v1/topics/lazy/records?acks=1", timeout=120, json={
            "records": [{"value": f"v{p}", "partition": p} for p in range(WRITTEN)]})
        assert r.status_code == 200, r.text
        written = open_descriptors(broker)
        assert written - idle < OPEN_FILES_MAX + 100, (idle, written)
        assert len(list(broker.data_dir.glob("lazy-*"))) == WRITTEN
        session = requests.Session()
        for p in (0, WRITTEN // 2, WRITTEN - 1):
            body = session.get(f"{broker.url}/v1/topics/lazy/partitions/{p}/records",
                               params={"offset": 0, "timeout_ms": 0}, timeout=10).json()
            assert [x["value"] for x in body["records"]] == [f"v{p}"]
        print(f"descriptors: {idle} idle, {created} with {LAZY_PARTITIONS} partitions, "
              f"{written} with {WRITTEN} of them written")

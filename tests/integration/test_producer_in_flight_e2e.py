"""An idempotent producer with five requests in flight per leader (its default) keeps a
partition's records in order through a kill -9 of the partition's leader (RF 3, real
`kraft-node` processes): every record written once, none missing, none reordered."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kraft.api.client import Consumer, Producer, TopicPartition
from tests.harness import REPLICATION_OVERRIDES, Cluster, partition_state, wait_for

pytestmark = [pytest.mark.cluster]

TOPIC = "inflight"


class InFlightCounter:
    """Wraps a producer's transport to count its produce requests waiting at once."""

    def __init__(self, transport: Any) -> None:
        self.real_request = transport.request
        self.inside = self.peak = 0
        self.lock = threading.Lock()

    def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        if path != "/v1/produce":
            return self.real_request(method, path, body, **kwargs)
        with self.lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
        try:
            return self.real_request(method, path, body, **kwargs)
        finally:
            with self.lock:
                self.inside -= 1


def test_five_requests_in_flight_keep_order_through_a_leader_kill(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=REPLICATION_OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        leader = partition_state(cluster, 1, TOPIC)["leader"]
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        producer = Producer(bootstrap, acks="all", enable_idempotence=True, linger_ms=0, batch_size=4_096,
                            retry_backoff_ms=50)
        counter = InFlightCounter(producer._transport)
        producer._transport.request = counter.request
        futures: list = []
        stop = threading.Event()

        def send() -> None:  # one record after another, as fast as the producer takes them
            while not stop.is_set():
                futures.append(producer.send(TOPIC, b"%08d" % len(futures)))

        sender = threading.Thread(target=send)
        with producer:
            sender.start()
            try:
                wait_for(lambda: sum(f.done() for f in futures[:3000]) >= 3000, 60, what="3000 records acked")
                cluster.kill(leader)  # kill -9, requests in flight to it
                wait_for(lambda: partition_state(cluster, next(i for i in (1, 2, 3) if i != leader), TOPIC)["leader"]
                         not in (leader, -1, None), 30, what="a new leader")
                acked = len(futures)
                wait_for(lambda: all(f.done() for f in futures[acked:acked + 3000]) and len(futures) > acked + 3000,
                         90, what="3000 more records acked after the kill")
            finally:
                stop.set()
                sender.join()
            producer.flush(120)
        results = [f.get(timeout=1) for f in futures]  # raises if any record failed
        assert counter.peak >= 2, "the producer never had two requests in flight"
        assert counter.peak <= 5
        assert [r.offset for r in results] == list(range(len(futures)))
        survivor = next(n for i, n in cluster.nodes.items() if i != leader)
        consumer = Consumer(survivor.bootstrap)
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        stored: list[bytes] = []
        while len(stored) < len(futures):
            got = consumer.poll(timeout_ms=2000).get(tp, [])
            assert got or len(stored) < len(futures), "records missing"
            stored.extend(r.value for r in got)
        consumer.close()
        assert stored == [b"%08d" % i for i in range(len(futures))]  # no duplicate, no gap, no reorder

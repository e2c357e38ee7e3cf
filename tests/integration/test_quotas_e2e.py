"""Client quotas on a real node: a producer whose client id has producer_byte_rate (set with
`kraft configs --entity-type clients`) is held to that rate within 20% once its burst credit is
spent, the broker reports the throttle in its answers and in kafka_server_produce_throttle_time;
a consumer over consumer_byte_rate gets throttled fetch answers. The rate is low (5 requests a
second) so a loaded machine serves each request well within its share: the broker's throttle,
computed from the measured rate, absorbs the noise."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Callable

import msgpack
import requests

from kraft.api.client import Producer
from harness import start_node, wait_for

KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]
VALUE = b"q" * 4000  # batch framing adds ~2%, well inside the tolerance
RATE = 20_000  # bytes per second


def metric(node, name: str, client_id: str) -> float:
    for line in requests.get(f"{node.url}/metrics", timeout=10).text.splitlines():
        if line.startswith(f"{name}{{") and f'client_id="{client_id}"' in line:
            return float(line.split()[-1])
    return 0.0


def seen_while(node, name: str, client_id: str, throttled_call: Callable[[], object]) -> bool:
    """Whether the throttle-time gauge of `client_id` shows a throttle while `throttled_call` is held
    back (the gauge averages over the sampled windows only, so it is read during the wait)."""
    seen: list[bool] = []

    def shown_or_done() -> bool:
        if metric(node, name, client_id) > 0:
            seen.append(True)
        return bool(seen) or not worker.is_alive()

    worker = threading.Thread(target=throttled_call)
    worker.start()
    try:
        wait_for(shown_or_done, 30)
        return bool(seen)
    finally:
        worker.join(60)


def test_producer_and_consumer_quotas(tmp_path):
    node = start_node(tmp_path, **{"quota.window.num": 2})  # burst credit: one 1 s window
    try:
        for key, client in (("producer_byte_rate", "slow-producer"), ("consumer_byte_rate", "slow-consumer")):
            subprocess.run(KRAFT + ["configs", "--bootstrap-server", node.bootstrap, "--alter", "--entity-type",
                                    "clients", "--entity-name", client, "--add-config", f"{key}={RATE}"],
                           check=True, capture_output=True, timeout=60)
        requests.post(f"{node.url}/v1/topics", json={"name": "q", "partitions": 1}, timeout=30).raise_for_status()

        sent_at = []
        with Producer(node.bootstrap, client_id="slow-producer", linger_ms=0) as producer:
            for _ in range(50):  # one record per request: each answer waits for the one before
                producer.send("q", value=VALUE, partition=0).result(timeout=60)
                sent_at.append(time.monotonic())
            throttle_seen = seen_while(node, "kafka_server_produce_throttle_time", "slow-producer",
                                       lambda: producer.send("q", value=VALUE, partition=0).result(timeout=60))
        steady = sent_at[15:]
        rate = len(VALUE) * (len(steady) - 1) / (steady[-1] - steady[0])
        assert abs(rate - RATE) / RATE < 0.2, rate
        assert throttle_seen

        fetch = {"max_wait_ms": 0, "partitions": [{"topic": "q", "partition": 0, "fetch_offset": 0,
                                                   "partition_max_bytes": 10 * len(VALUE)}]}
        headers = {"Content-Type": "application/msgpack", "Accept": "application/msgpack",
                   "X-Kraft-Client-Id": "slow-consumer"}
        throttled = []
        for _ in range(3):  # ~40 KB each, twice the quota: the answers are held back
            answer = msgpack.unpackb(requests.post(f"{node.url}/v1/fetch", data=msgpack.packb(fetch),
                                                   headers=headers, timeout=60).content)
            assert answer["partitions"][0]["records"]
            throttled.append(answer["throttle_time_ms"])
        assert all(t > 0 for t in throttled), throttled
        assert seen_while(node, "kafka_server_fetch_throttle_time", "slow-consumer",
                          lambda: requests.post(f"{node.url}/v1/fetch", data=msgpack.packb(fetch), headers=headers,
                                                timeout=60))
        # an unlimited client id is never throttled
        headers["X-Kraft-Client-Id"] = "other"
        answer = msgpack.unpackb(requests.post(f"{node.url}/v1/fetch", data=msgpack.packb(fetch), headers=headers,
                                               timeout=60).content)
        assert answer["throttle_time_ms"] == 0
    finally:
        node.stop()


def test_request_percentage_throttles_by_handler_time(tmp_path):
    node = start_node(tmp_path, **{"quota.window.num": 2})
    try:
        subprocess.run(KRAFT + ["configs", "--bootstrap-server", node.bootstrap, "--alter", "--entity-type",
                                "clients", "--entity-name", "busy", "--add-config", "request_percentage=0.001"],
                       check=True, capture_output=True, timeout=60)  # 10 µs of loop time per second
        headers = {"X-Kraft-Client-Id": "busy"}
        throttles = [requests.get(f"{node.url}/v1/metadata", headers=headers, timeout=30)
                     .headers.get("X-Kraft-Throttle-Time-Ms") for _ in range(3)]
        assert all(t is not None and int(t) > 0 for t in throttles), throttles
        assert seen_while(node, "kafka_server_request_throttle_time", "busy",
                          lambda: requests.get(f"{node.url}/v1/metadata", headers=headers, timeout=30))
        other = requests.get(f"{node.url}/v1/metadata", headers={"X-Kraft-Client-Id": "idle"}, timeout=30)
        assert "X-Kraft-Throttle-Time-Ms" not in other.headers
    finally:
        node.stop()

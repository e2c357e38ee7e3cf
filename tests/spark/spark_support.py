"""Helpers of the Spark connector tests: admin and data calls over a broker's HTTP routes (the real
node, or the FakeBroker for what a real broker cannot be made to do on demand)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import msgpack
import requests

from kraft.log.batch import build_batch, decode_records, iter_batches

if TYPE_CHECKING:
    from fake_broker import FakeBroker


class KraftFixture:
    """Admin and data helpers over the HTTP routes, for whichever broker runs."""

    def __init__(self, bootstrap: str, fake: FakeBroker | None) -> None:
        self.bootstrap = bootstrap
        self.fake = fake
        self.url = f"http://{bootstrap}"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        r = requests.request(method, self.url + path, json=body, timeout=30)
        assert r.status_code < 300, r.text
        return r.json() if r.headers.get("Content-Type", "").startswith("application/json") else msgpack.unpackb(r.content)

    def new_topic(self, partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self._call("POST", "/v1/topics", {"name": name, "partitions": partitions, "replication_factor": 1})
        return name

    def add_partitions(self, topic: str, total: int) -> None:
        self._call("POST", f"/v1/topics/{topic}/partitions", {"count": total})

    def delete_topic(self, topic: str) -> None:
        self._call("DELETE", f"/v1/topics/{topic}")

    def produce(self, topic: str, partition: int, values: list[bytes], keys: list[bytes | None] | None = None,
                timestamp_ms: int = 1_700_000_000_000) -> None:
        keys = keys or [None] * len(values)
        batch = build_batch([(k, v, (), timestamp_ms + i) for i, (k, v) in enumerate(zip(keys, values))])
        body = {"acks": -1, "timeout_ms": 10_000,
                "partitions": [{"topic": topic, "partition": partition, "records": batch}]}
        r = requests.post(self.url + "/v1/produce", data=msgpack.packb(body, use_bin_type=True), timeout=30,
                          headers={"Content-Type": "application/msgpack", "Accept": "application/msgpack"})
        assert r.status_code == 200, r.text
        answer = msgpack.unpackb(r.content, raw=False)["partitions"][0]
        assert not answer.get("error_code"), answer

    def committed_values(self, topic: str) -> list[bytes]:
        """Every value a read_committed consumer reads from `topic`, to each partition's last stable
        offset (the real node only: the Python client)."""
        from kraft.api.client import Consumer, TopicPartition

        consumer = Consumer(bootstrap_servers=self.bootstrap, isolation_level="read_committed", enable_auto_commit=False)
        try:
            tps = [TopicPartition(topic, p) for p in range(self.partition_count(topic))]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            ends = consumer.end_offsets(tps)
            values: list[bytes] = []
            while any(consumer.position(tp) < ends[tp] for tp in tps):
                for records in consumer.poll(1000).values():
                    values += [r.value for r in records]
            return values
        finally:
            consumer.close(autocommit=False)

    def records(self, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
        """Every (offset, key, value) of a partition, read with the fetch route."""
        out: list[tuple[int, bytes | None, bytes | None]] = []
        offset = 0
        while True:
            body = {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "partitions": [
                {"topic": topic, "partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 24}]}
            r = requests.post(self.url + "/v1/fetch", data=msgpack.packb(body, use_bin_type=True), timeout=30,
                              headers={"Content-Type": "application/msgpack", "Accept": "application/msgpack"})
            part = msgpack.unpackb(r.content, raw=False)["partitions"][0]
            assert not part.get("error_code"), part
            buf = part["records"]
            batches = list(iter_batches(buf))
            if not batches:
                return out
            for pos, header in batches:
                out.extend((rec.offset, rec.key, rec.value) for rec in decode_records(buf, pos) if rec.offset >= offset)
                offset = header.next_offset
            if offset >= part["high_watermark"]:
                return out

    def partition_count(self, topic: str) -> int:
        return len(next(t for t in self._call("GET", "/v1/metadata")["topics"] if t["name"] == topic)["partitions"])

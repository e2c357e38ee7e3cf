"""Compression on a real node (issue 22 item 12): a topic's compression.type recompresses what the
producer sent before it is stored, and snappy goes through the Python client both ways."""

from __future__ import annotations

import uuid

import msgpack
import pytest
import requests

from kraft.api.client import Admin, Consumer, KraftError, Producer, TopicPartition
from kraft.log.batch import decode_records, iter_batches, validate_batch

pytestmark = pytest.mark.cluster

MSGPACK = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}


def _stored_batches(url: str, topic: str) -> bytes:
    fetch = {"max_wait_ms": 0, "partitions": [{"topic": topic, "partition": 0, "fetch_offset": 0}]}
    r = requests.post(f"{url}/v1/fetch", data=msgpack.packb(fetch), headers=MSGPACK, timeout=10)
    assert r.status_code == 200, r.text
    [answer] = msgpack.unpackb(r.content)["partitions"]
    return answer["records"]


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(bootstrap)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []
    while len(values) < count:
        polled = consumer.poll(timeout_ms=5000)
        assert polled, f"no progress after {len(values)} records"
        values += [r.value for r in polled[tp]]
    consumer.close()
    return values


def _produce(bootstrap: str, topic: str, values: list[bytes], compression: str) -> None:
    with Producer(bootstrap, acks="all", linger_ms=20, compression_type=compression) as producer:
        futures = [producer.send(topic, value=v) for v in values]
        producer.flush()
        for future in futures:
            future.result(timeout=30)


def test_topic_compression_type_recompresses_the_producers_batches(node) -> None:
    topic = f"zstd-{uuid.uuid4().hex[:8]}"
    Admin(node.bootstrap).create_topic(topic, partitions=1, configs={"compression.type": "zstd"})
    values = [b"value-%d " % i * 20 for i in range(300)]
    _produce(node.bootstrap, topic, values, "none")
    stored = _stored_batches(node.url, topic)
    batches = list(iter_batches(stored))
    assert batches and all(validate_batch(stored, pos).compression == "zstd" for pos, _ in batches)
    assert [r.value for pos, _ in batches for r in decode_records(stored, pos)] == values
    assert _consume(node.bootstrap, topic, len(values)) == values


def test_snappy_round_trip_through_the_client(node) -> None:
    topic = f"snappy-{uuid.uuid4().hex[:8]}"
    admin = Admin(node.bootstrap)
    admin.create_topic(topic, partitions=1)  # compression.type=producer: stored as sent
    values = [b"snappy-%d " % i * 10 for i in range(500)]
    _produce(node.bootstrap, topic, values, "snappy")
    stored = _stored_batches(node.url, topic)
    assert {validate_batch(stored, pos).compression for pos, _ in iter_batches(stored)} == {"snappy"}
    assert _consume(node.bootstrap, topic, len(values)) == values
    with pytest.raises(KraftError) as err:  # the topic's value for "no codec" is "uncompressed"
        admin.create_topic(f"bad-{topic}", configs={"compression.type": "none"})
    assert err.value.error_code == "INVALID_CONFIG"

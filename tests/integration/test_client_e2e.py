"""The Python client against a real node: producer batching and partitioning, consumer seeks, and
kafka-python's habits, topics auto-created through metadata, errors reported with their cause."""

from __future__ import annotations

import json
import logging
import time
import uuid

import pytest
import requests

from kraft.api.client import (
    Admin, Consumer, KraftError, NoBrokersAvailable, OffsetAndMetadata, Producer, TopicPartition,
)
from kraft.api.partitioner import partition_for_key
from harness import free_port, shutdown_all, start_node


def test_produce_consume_round_trip(node):
    t = f"py-{uuid.uuid4().hex[:8]}"
    admin = Admin(node.bootstrap)
    admin.create_topic(t, partitions=4)
    with Producer(node.bootstrap, acks="all", linger_ms=5) as producer:
        futures = [producer.send(t, key=f"key-{i % 17}", value=f"value-{i}") for i in range(2000)]
        futures += [producer.send(t, value=b"nokey-%d" % i) for i in range(500)]
        producer.flush()
        metas = [f.result(timeout=30) for f in futures]
    for i, m in enumerate(metas[:2000]):
        assert m.partition == partition_for_key(f"key-{i % 17}".encode(), 4)
    per_partition: dict[int, list[int]] = {}
    for m in metas:
        per_partition.setdefault(m.partition, []).append(m.offset)
    for offsets in per_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))  # dense, no duplicates

    consumer = Consumer(node.bootstrap)
    tps = [TopicPartition(t, p) for p in range(4)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    seen = []
    while len(seen) < 2500:
        batch = consumer.poll(timeout_ms=2000)
        assert batch, f"no progress after {len(seen)} records"
        for recs in batch.values():
            seen.extend(recs)
    assert len(seen) == 2500
    assert sorted(r.value for r in seen) == sorted([f"value-{i}".encode() for i in range(2000)] +
                                                   [b"nokey-%d" % i for i in range(500)])
    # seek to an offset and to the end
    tp0 = tps[metas[0].partition]
    consumer.seek(tp0, 3)
    first = consumer.poll(timeout_ms=2000)[tp0][0]
    assert first.offset == 3
    consumer.seek_to_end(tp0)
    assert consumer.position(tp0) == len(per_partition[tp0.partition])
    consumer.close()
    admin.delete_topic(t)


def test_offsets_for_times(node):
    t = f"ts-{uuid.uuid4().hex[:8]}"
    Admin(node.bootstrap).create_topic(t, partitions=1)
    with Producer(node.bootstrap) as producer:
        for i in range(10):
            producer.send(t, value=b"v", timestamp_ms=1_700_000_000_000 + i * 10)
    consumer = Consumer(node.bootstrap)
    tp = TopicPartition(t, 0)
    result = consumer.offsets_for_times({tp: 1_700_000_000_045})
    assert result[tp].offset == 5
    consumer.close()


# -- kafka-python habits, auto-create and errors on a real node (issue 16) -----------------------


def test_kafka_python_consumer_habits_in_a_group(node):
    t = f"kp-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=node.bootstrap, client_id="kp", acks="all",
                  key_serializer=str.encode, value_serializer=lambda v: json.dumps(v).encode()) as producer:
        callbacks: list = []
        futures = [producer.send(t, {"i": i}, key=f"k{i}").add_callback(callbacks.append) for i in range(6)]
        producer.flush()
        metas = [f.get(timeout=30) for f in futures]  # the topic was auto-created by the first send
    assert sorted((m.partition, m.offset) for m in callbacks) == sorted((m.partition, m.offset) for m in metas)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(t, group_id=group, bootstrap_servers=node.bootstrap, auto_offset_reset="earliest",
                        enable_auto_commit=False, value_deserializer=json.loads, key_deserializer=bytes.decode)
    assert consumer.subscription() == {t}  # not its letters
    seen = []
    deadline = time.monotonic() + 60
    while len(seen) < 6 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            seen.extend(records)
    assert sorted(r.value["i"] for r in seen) == list(range(6))
    assert all(r.key == f"k{r.value['i']}" for r in seen)
    tp = TopicPartition(t, 0)
    assert consumer.highwater(tp) == 6 == consumer.end_offsets([tp])[tp]
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert t in consumer.topics()
    consumer.commit({tp: OffsetAndMetadata(4, "checkpoint-a")})
    assert consumer.committed(tp) == 4
    assert consumer.committed(tp, metadata=True) == OffsetAndMetadata(4, "checkpoint-a")
    consumer.pause(tp)
    assert consumer.paused() == {tp}
    consumer.seek(tp, 0)
    assert consumer.poll(timeout_ms=200) == {}  # paused: nothing is returned
    consumer.resume(tp)
    assert next(iter(consumer.poll(timeout_ms=5000).values()))[0].offset == 0
    consumer.close()


def test_producer_auto_creates_through_metadata(node):
    t = f"auto-{uuid.uuid4().hex[:8]}"
    with Producer(node.bootstrap, max_block_ms=60_000) as producer:
        assert producer.send(t, b"first").get(timeout=30).offset == 0
    assert Admin(node.bootstrap).describe_topic(t).name == t
    # An internal topic is not created by a client's metadata request (its owner creates it).
    never = f"never-{uuid.uuid4().hex[:8]}"  # without the flag, metadata creates nothing
    answer = requests.get(f"{node.url}/v1/metadata", params={"topics": f"__transaction_state,{never}"}).json()
    assert answer["topics"] == [] and {e["name"] for e in answer["topic_errors"]} == {"__transaction_state", never}
    answer = requests.get(f"{node.url}/v1/metadata", params={
        "topics": "__transaction_state", "allow_auto_topic_creation": "true"}).json()
    assert answer["topics"] == [] and answer["topic_errors"][0]["error_code"] == "INVALID_REQUEST"


def test_no_auto_create_fails_at_once_with_the_reason(tmp_path):
    strict = start_node(tmp_path, **{"auto.create.topics.enable": "false"})
    try:
        with Producer(strict.bootstrap, max_block_ms=120_000) as producer:
            with pytest.raises(KraftError) as err:
                producer.send("nowhere", b"x")
        assert err.value.error_code == "UNKNOWN_TOPIC_OR_PARTITION"
        assert "auto.create.topics.enable is false" in err.value.message
        assert "nowhere" not in {t.name for t in Admin(strict.bootstrap).list_topics()}
    finally:
        shutdown_all([strict])


def test_not_enough_replicas_is_the_reported_cause(node, caplog):
    t = f"isr-{uuid.uuid4().hex[:8]}"
    Admin(node.bootstrap).create_topic(t, partitions=1, replication_factor=1, configs={"min.insync.replicas": "2"})
    with Producer(node.bootstrap, acks="all", retries=0) as producer:
        error = producer.send(t, b"x").exception(timeout=60)
    assert error is not None and error.error_code == "NOT_ENOUGH_REPLICAS"
    with caplog.at_level(logging.WARNING, logger="kraft.api.client.sender"):
        with Producer(node.bootstrap, acks="all", delivery_timeout_ms=3000, retry_backoff_ms=100) as producer:
            error = producer.send(t, b"x").exception(timeout=60)
    assert error is not None and error.error_code == "REQUEST_TIMED_OUT"
    assert "last error: NOT_ENOUGH_REPLICAS" in error.message
    assert [r.levelno for r in caplog.records if "NOT_ENOUGH_REPLICAS" in r.getMessage()] == [logging.WARNING]


def test_no_broker_is_connection_refused_at_once():
    address = f"127.0.0.1:{free_port()}"
    with Producer(address, max_block_ms=120_000) as producer:
        with pytest.raises(NoBrokersAvailable) as err:
            producer.send("t", b"x")
    assert err.value.error_code == "NETWORK_EXCEPTION" and "connection refused" in err.value.message
    with Admin(address, api_timeout_ms=120_000) as admin, pytest.raises(NoBrokersAvailable):
        admin.list_topics()

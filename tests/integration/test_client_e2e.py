"""The Python client against a real node: producer batching and partitioning, consumer seeks."""

from __future__ import annotations

import uuid

from api.client import Admin, Consumer, Producer, TopicPartition
from api.partitioner import partition_for_key


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

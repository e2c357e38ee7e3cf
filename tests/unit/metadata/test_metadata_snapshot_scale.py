"""Snapshot round trip at 100k partitions (to_snapshot -> msgpack -> from_snapshot), with one topic
of 50k partitions changed by a delta in between, and the load of a snapshot the older code wrote."""

from __future__ import annotations

import pickle

import msgpack

from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.log_rules import RequestWindow
from kraft.metadata.records import PartitionChange

PARTITIONS = 100_000
BIG = 50_000  # one topic this large, the rest in topics of 1,000


def build() -> MetadataImage:
    """100k partitions with distinct registrations (epochs vary), loaded from their snapshot form;
    the 100k-record replay path has its own test (tests/unit/raft/test_raft_snapshot_scale.py)."""
    sizes = [BIG] + [1000] * ((PARTITIONS - BIG) // 1000)
    snapshot = MetadataImage.EMPTY.to_snapshot()
    snapshot.update(
        offset=PARTITIONS + 100, controller_epoch=1, controller_id=1,
        brokers=[[b, f"inc-{b}", b, [["HTTP", "h", 9000 + b]], None, False] for b in (1, 2, 3)],
        topics=[[f"t{t}", f"id{t}", [[p, [1 + p % 3, 1 + (p + 1) % 3], [1 + p % 3], 1 + p % 3, p % 7, p % 11, [], []]
                                     for p in range(size)]] for t, size in enumerate(sizes)],
        request_ids=[[f"create-{t}", t] for t in range(len(sizes))])
    return MetadataImage.from_snapshot(snapshot)


def round_trip(image: MetadataImage) -> MetadataImage:
    packed = msgpack.packb(image.to_snapshot(), use_bin_type=True)
    return MetadataImage.from_snapshot(msgpack.unpackb(packed, raw=False, strict_map_key=False))


def test_snapshot_round_trip_at_100k_partitions() -> None:
    image = build()
    assert image.topics.partition_count == PARTITIONS and len(image.topic_by_name("t0").partitions) == BIG
    loaded = round_trip(image)
    assert loaded == image and loaded.topics.partition_count == PARTITIONS
    assert list(loaded.request_ids.items()) == list(image.request_ids.items())
    # a delta on the large topic, then the same again
    change = PartitionChange(topic_id="id0", partition=BIG - 1, leader=2, isr=(2,), controller_epoch=1)
    _, changed = apply_records(loaded, [(loaded.offset + 1, change)])
    assert changed.partition("t0", BIG - 1).isr == (2,)
    assert changed.partition("t0", BIG - 2) is loaded.partition("t0", BIG - 2)
    assert round_trip(changed) == changed != image
    assert pickle.loads(pickle.dumps(changed)) == changed  # the Raft dump's form (as the snapshot)


def test_a_snapshot_written_by_the_older_code_loads() -> None:
    """Format 1 from before the persistent maps: request ids kept 5,000 by recency, no SCRAM/ACLs/quotas."""
    old = {"format": 1, "offset": 6000, "controller_epoch": 3, "controller_id": 2,
           "brokers": [[1, "inc", 5, [["HTTP", "h", 9001]], None, False]],
           "topics": [["t", "tid", [[0, [1], [1], 1, 2, 4, [], []], [1, [1], [1], 1, 0, 0, [], []]]]],
           "configs": [["topic", "t", {"retention.ms": "5"}]], "next_producer_id": 1000,
           "request_ids": [[f"r{i}", i] for i in range(5000)]}
    image = MetadataImage.from_snapshot(old)
    assert image.partition("t", 0).partition_epoch == 4 and image.topics.partition_count == 2
    assert isinstance(image.request_ids, RequestWindow) and list(image.request_ids)[:2] == ["r0", "r1"]
    assert len(image.request_ids) == 5000 and dict(image.topic_configs("t")) == {"retention.ms": "5"}
    assert image.to_snapshot()["request_ids"] == old["request_ids"]

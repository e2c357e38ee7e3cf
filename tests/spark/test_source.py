"""The kraft source on a real local Spark: batch reads of exact ranges, streaming with
Trigger.AvailableNow across runs on one checkpoint, maxOffsetsPerTrigger, data loss, bad options."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def _read(spark: Any, broker: Any, **options: str) -> Any:
    reader = spark.read.format("kraft").option("kraft.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _run_available_now(spark: Any, broker: Any, checkpoint: str, **options: str) -> list[tuple[int, list[Any]]]:
    """One Trigger.AvailableNow run; returns (batch id, rows) per micro-batch."""
    batches: list[tuple[int, list[Any]]] = []
    reader = spark.readStream.format("kraft").option("kraft.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream
             .foreachBatch(lambda df, batch_id: batches.append((batch_id, df.collect())))
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert not query.isActive, "availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return batches


def test_batch_read_of_exact_offset_ranges(spark, broker):
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 0, [b"a%d" % i for i in range(20)], keys=[b"k%d" % i for i in range(20)])
    broker.produce(topic, 1, [b"b%d" % i for i in range(10)])
    df = _read(spark, broker, subscribe=topic,
               startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
               endingOffsets=json.dumps({topic: {"0": 12, "1": -1}}))
    rows = df.collect()
    got = sorted((r.partition, r.offset, r.key, r.value, r.topic, r.timestampType) for r in rows)
    expected = sorted([(0, o, b"k%d" % o, b"a%d" % o, topic, 0) for o in range(5, 12)]
                      + [(1, o, None, b"b%d" % o, topic, 0) for o in range(10)])
    assert got == expected
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>")
    # timestamps are the producer's (the helper stamps 1_700_000_000_000 + i ms), in UTC
    epoch = datetime(1970, 1, 1)
    assert all(r.timestamp - epoch == timedelta(milliseconds=1_700_000_000_000 + r.offset) for r in rows)


def test_batch_read_with_min_partitions_and_assign(spark, broker):
    topic = broker.new_topic(partitions=2)
    broker.produce(topic, 0, [b"%d" % i for i in range(100)])
    broker.produce(topic, 1, [b"x"])
    df = _read(spark, broker, assign=json.dumps({topic: [0]}), minPartitions="4")
    assert df.rdd.getNumPartitions() >= 4
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(100))


def test_batch_read_starting_timestamp(spark, broker):
    topic = broker.new_topic()
    broker.produce(topic, 0, [b"old"] * 5, timestamp_ms=1_000)
    broker.produce(topic, 0, [b"new"] * 3, timestamp_ms=5_000)
    rows = _read(spark, broker, subscribe=topic, startingTimestamp="5000").collect()
    assert sorted((r.offset, r.value) for r in rows) == [(5, b"new"), (6, b"new"), (7, b"new")]


def test_streaming_available_now_across_runs_picks_up_new_partitions(spark, broker, tmp_path):
    topic = broker.new_topic(partitions=2)
    checkpoint = str(tmp_path / "cp")
    broker.produce(topic, 0, [b"r1-p0-%d" % i for i in range(7)])
    broker.produce(topic, 1, [b"r1-p1-%d" % i for i in range(4)])
    first = _run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest")
    broker.produce(topic, 0, [b"r2-p0-%d" % i for i in range(3)])
    broker.add_partitions(topic, 3)
    broker.produce(topic, 2, [b"r2-p2-%d" % i for i in range(5)])
    second = _run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest")
    seen = [(r.partition, r.offset) for _, rows in first + second for r in rows]
    assert len(seen) == len(set(seen)), "a record was read twice"
    expected = {(0, o) for o in range(10)} | {(1, o) for o in range(4)} | {(2, o) for o in range(5)}
    assert set(seen) == expected
    assert {r.value for _, rows in second for r in rows} == (
        {b"r2-p0-%d" % i for i in range(3)} | {b"r2-p2-%d" % i for i in range(5)})


def test_max_offsets_per_trigger_splits_batches(spark, broker, tmp_path):
    topic = broker.new_topic(partitions=1)
    broker.produce(topic, 0, [b"%d" % i for i in range(25)])
    batches = _run_available_now(spark, broker, str(tmp_path / "cp"), subscribe=topic,
                                 startingOffsets="earliest", maxOffsetsPerTrigger="10")
    sizes = [len(rows) for _, rows in batches if rows]
    assert sizes == [10, 10, 5]
    assert sorted(r.offset for _, rows in batches for r in rows) == list(range(25))


def test_streaming_latest_start_skips_old_records(spark, broker, tmp_path):
    topic = broker.new_topic()
    broker.produce(topic, 0, [b"before"] * 3)
    checkpoint = str(tmp_path / "cp")
    assert [r for _, rows in _run_available_now(spark, broker, checkpoint, subscribe=topic) for r in rows] == []
    broker.produce(topic, 0, [b"after"] * 2)
    rows = [r for _, rows in _run_available_now(spark, broker, checkpoint, subscribe=topic) for r in rows]
    assert sorted((r.offset, r.value) for r in rows) == [(3, b"after"), (4, b"after")]


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_deleted_topic_is_data_loss(spark, broker, tmp_path, fail_on_data_loss):
    prefix = f"loss{fail_on_data_loss}"
    kept, doomed = broker.new_topic(prefix=prefix), broker.new_topic(prefix=prefix)
    broker.produce(kept, 0, [b"k"])
    broker.produce(doomed, 0, [b"d"])
    checkpoint = str(tmp_path / "cp")
    options = {"subscribePattern": f"{prefix}-.*", "startingOffsets": "earliest", "failOnDataLoss": fail_on_data_loss}
    first = _run_available_now(spark, broker, checkpoint, **options)
    assert sorted(r.value for _, rows in first for r in rows) == [b"d", b"k"]
    broker.delete_topic(doomed)
    broker.produce(kept, 0, [b"k2"])
    if fail_on_data_loss == "true":
        with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE: partition.* disappeared"):
            _run_available_now(spark, broker, checkpoint, **options)
    else:
        second = _run_available_now(spark, broker, checkpoint, **options)
        assert [r.value for _, rows in second for r in rows] == [b"k2"]


def test_retention_past_the_checkpoint_is_data_loss(spark, fake_broker):
    broker = fake_broker  # deleting records on demand needs the fake's retention hook
    topic = broker.new_topic()
    for i in range(3):
        broker.produce(topic, 0, [b"%d-%d" % (i, j) for j in range(5)])
    with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE.*failOnDataLoss=false"):
        broker.fake.delete_records_before(topic, 0, 5)
        _read(spark, broker, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 2}})).collect()
    rows = _read(spark, broker, subscribe=topic, failOnDataLoss="false",
                 startingOffsets=json.dumps({topic: {"0": 2}})).collect()
    assert sorted(r.offset for r in rows) == list(range(5, 15))


@pytest.mark.parametrize("options, words", [
    ({"subscribe": "no-such-topic-here"}, "UNKNOWN_TOPIC_OR_PARTITION"),
    ({"subscribe": "x", "startingOffsets": "{oops"}, "startingOffsets is not valid JSON"),
    ({"subscribe": "x", "maxOfsetsPerTrigger": "5"}, "unknown option"),
])
def test_wrong_options_fail_clearly(spark, broker, options, words):
    with pytest.raises(Exception, match=words):
        _read(spark, broker, **options).collect()

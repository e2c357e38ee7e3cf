"""The kraft sink on a real local Spark: batch and streaming writes land where Kafka would put
keyed records; the exactly-once mode writes a replayed micro-batch once; bad input fails clearly."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kraft.api.partitioner import partition_for_key

pytestmark = pytest.mark.spark


def _writer(df: Any, broker: Any, **options: str) -> Any:
    writer = df.write.format("kraft").mode("append").option("kraft.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        writer = writer.option(k, v)
    return writer


def _all(broker: Any, topic: str) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    return {p: broker.records(topic, p) for p in range(broker.partition_count(topic))}


def test_batch_write_puts_keys_in_kafkas_partitions(spark, broker):
    topic = broker.new_topic(partitions=4)
    rows = [(f"key-{i}", f"value-{i}".encode()) for i in range(200)]
    _writer(spark.createDataFrame(rows, "key string, value binary"), broker, topic=topic).save()
    written = _all(broker, topic)
    assert sum(len(v) for v in written.values()) == 200
    for partition, records in written.items():
        for _, key, value in records:
            assert partition_for_key(key, 4) == partition
            assert value == b"value-" + key[4:]


def test_batch_write_routes_by_topic_and_partition_columns(spark, broker):
    a, b = broker.new_topic(partitions=2), broker.new_topic(partitions=3)
    rows = [(a, None, "x", None, [("h", b"1")]), (b, 2, "y", None, []), (b, None, "z", b"k", None)]
    df = spark.createDataFrame(rows, "topic string, partition int, value string, key binary, "
                                     "headers array<struct<key:string,value:binary>>")
    _writer(df, broker).save()
    assert sorted(v for recs in _all(broker, a).values() for _, _, v in recs) == [b"x"]
    written_b = _all(broker, b)
    assert [v for _, _, v in written_b[2] if v == b"y"] == [b"y"]
    assert [v for _, _, v in written_b[partition_for_key(b"k", 3)] if v == b"z"] == [b"z"]
    headers = spark.read.format("kraft").option("kraft.bootstrap.servers", broker.bootstrap) \
        .option("subscribe", a).option("includeHeaders", "true").load().collect()[0].headers
    assert [(h.key, h.value) for h in headers] == [("h", b"1")]


@pytest.mark.parametrize("ddl, options, words", [
    ("key binary", {"topic": "x"}, "needs a value column"),
    ("value int", {"topic": "x"}, "column value has type int"),
    ("value binary", {}, "no topic"),
    ("value binary", {"topic": "no-such-topic-anywhere"}, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("value binary", {"topic": "x", "kraft.acks": "2"}, "kraft.acks"),
])
def test_bad_sink_input_fails_clearly(spark, broker, ddl, options, words):
    value = 1 if ddl == "value int" else b"v"
    df = spark.createDataFrame([(value,)], ddl)
    with pytest.raises(Exception, match=words):
        _writer(df, broker, **options).save()


def _stream_copy(spark: Any, broker: Any, source: str, sink: str, checkpoint: Path, **sink_options: str) -> None:
    """Copies `source` to `sink` (key kept, value upper-cased) with one availableNow run."""
    df = (spark.readStream.format("kraft").option("kraft.bootstrap.servers", broker.bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "40").load()
          .selectExpr("key", "upper(cast(value as string)) as value"))
    writer = (df.writeStream.format("kraft").option("kraft.bootstrap.servers", broker.bootstrap)
              .option("topic", sink).option("checkpointLocation", str(checkpoint)))
    for k, v in sink_options.items():
        writer = writer.option(k, v)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert not query.isActive
    if query.exception() is not None:
        raise query.exception()


def test_streaming_write_puts_keys_in_kafkas_partitions(spark, broker, tmp_path):
    source, sink = broker.new_topic(partitions=2), broker.new_topic(partitions=3)
    broker.produce(source, 0, [b"v%d" % i for i in range(50)], keys=[b"k%d" % i for i in range(50)])
    broker.produce(source, 1, [b"w%d" % i for i in range(30)], keys=[b"j%d" % i for i in range(30)])
    _stream_copy(spark, broker, source, sink, tmp_path / "cp")
    written = _all(broker, sink)
    assert sum(len(v) for v in written.values()) == 80
    for partition, records in written.items():
        for _, key, value in records:
            assert partition_for_key(key, 3) == partition
            assert value.lower() == (b"v" if key.startswith(b"k") else b"w") + key[1:]


def _forget_last_commit(checkpoint: Path) -> int:
    """What a driver crash after the sink wrote, before Spark committed the batch, leaves behind:
    the batch's offsets are logged but not its commit, so the restarted query replays it."""
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    os.remove(last)
    crc = last.parent / f".{last.name}.crc"
    if crc.exists():
        os.remove(crc)
    return int(last.name)


MODES = {"idempotent": {"exactlyOnce": "true"}, "transactional": {"kraft.transactional.id.prefix": "copy-"},
         "at-least-once": {"exactlyOnce": "false"}}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_replayed_micro_batch_is_written_once_with_exactly_once(spark, broker, tmp_path, mode):
    """On the real node: the exactly-once sink's idempotent producers make the broker skip the
    replayed micro-batch, the transactional sink's tasks find it committed (a read_committed
    reader gets every record once); at-least-once writes it again (so the check can fail)."""
    source, sink = broker.new_topic(partitions=2), broker.new_topic(partitions=2)
    broker.produce(source, 0, [b"a%d" % i for i in range(60)], keys=[b"x%d" % i for i in range(60)])
    broker.produce(source, 1, [b"b%d" % i for i in range(30)])  # keyless: content decides the partition
    checkpoint = tmp_path / "cp"
    _stream_copy(spark, broker, source, sink, checkpoint, **MODES[mode])
    replayed = _forget_last_commit(checkpoint)
    assert replayed >= 1, "maxOffsetsPerTrigger=40 should have made several micro-batches"
    _stream_copy(spark, broker, source, sink, checkpoint, **MODES[mode])
    counts = Counter(broker.committed_values(sink) if mode == "transactional"
                     else (v for recs in _all(broker, sink).values() for _, _, v in recs))
    assert set(counts) == {b"A%d" % i for i in range(60)} | {b"B%d" % i for i in range(30)}
    if mode == "at-least-once":
        assert max(counts.values()) == 2, "at-least-once: the replayed micro-batch is written again"
    else:
        assert set(counts.values()) == {1}, "a replayed micro-batch was written twice"


def test_exactly_once_refuses_brokers_without_idempotence(spark, fake_broker, tmp_path):
    broker = fake_broker  # lists no "idempotence" feature in GET /v1/health
    source, sink = broker.new_topic(), broker.new_topic()
    broker.produce(source, 0, [b"v"])
    with pytest.raises(Exception, match="UNSUPPORTED_VERSION.*idempotence"):
        _stream_copy(spark, broker, source, sink, tmp_path / "cp", exactlyOnce="true")
    assert _all(broker, sink) == {0: []}


def test_exactly_once_producer_epochs_follow_the_micro_batch_id():
    from kraft.producer_ids import TRANSACTIONAL_ID_BASE, derived_producer_id
    from kraft.spark_connector.writer import SinkProducer

    first, later = SinkProducer.for_task("q", 3, 0), SinkProducer.for_task("q", 3, 32766)
    assert first.producer_id == later.producer_id == derived_producer_id("q-3") >= TRANSACTIONAL_ID_BASE
    assert (first.producer_epoch, later.producer_epoch) == (0, 32766)
    rolled = SinkProducer.for_task("q", 3, 32767 * 2 + 5)
    assert rolled == SinkProducer(derived_producer_id("q-3-2"), 5)
    assert SinkProducer.for_task("q", 4, 0).producer_id != first.producer_id

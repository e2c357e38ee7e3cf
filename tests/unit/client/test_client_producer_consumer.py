"""Producer, Consumer and Admin against the fake broker (real HTTP on 127.0.0.1, real codec)."""

from __future__ import annotations

import pytest

from kraft.api.client import Admin, Consumer, KraftError, Producer, TopicPartition
from kraft.api.client.futures import ProduceResult, RecordFutures
from kraft.api.client.producer import normalize_headers, parse_acks, to_bytes
from kraft.api.partitioner import partition_for_key
from client_fake_broker import FakeBroker
from kraft.log.batch import decode_records, iter_batches


def stored(broker: FakeBroker, topic: str, partition: int) -> list:
    data = broker.records(topic, partition)
    return [r for pos, _ in iter_batches(data) for r in decode_records(data, pos)]


def test_send_resolves_offsets_in_order(broker: FakeBroker) -> None:
    broker.create_topic("t", 1)
    with Producer(broker.bootstrap, linger_ms=1, batch_size=500) as producer:
        futures = [producer.send("t", f"v{i}", key=None, timestamp_ms=1000 + i) for i in range(100)]
        metas = [f.result(timeout=10) for f in futures]
    assert [m.offset for m in metas] == list(range(100))
    assert metas[7].timestamp == 1007 and metas[7].topic == "t" and metas[7].partition == 0
    assert [r.value for r in stored(broker, "t", 0)] == [f"v{i}".encode() for i in range(100)]
    assert len(list(iter_batches(broker.records("t", 0)))) > 1  # batch_size forced several batches


def test_keyed_records_land_where_kafka_puts_them(broker: FakeBroker) -> None:
    broker.create_topic("k", 6)
    with Producer(broker.bootstrap) as producer:
        futures = {f"user-{i}": producer.send("k", b"x", key=f"user-{i}") for i in range(60)}
        producer.flush(timeout=10)
    for key, f in futures.items():
        assert f.result().partition == partition_for_key(key.encode(), 6)
    assert stored(broker, "k", futures["user-3"].result().partition)[0].key is not None


def test_send_many_queues_records_as_sends_would(broker: FakeBroker) -> None:
    broker.create_topic("many", 1)
    broker.create_topic("many-keyed", 6)
    with Producer(broker.bootstrap, linger_ms=1, batch_size=500) as producer:
        futures = producer.send_many("many", [f"v{i}" for i in range(100)], timestamp_ms=1000)
        keys = [f"user-{i}".encode() for i in range(60)]
        keyed = producer.send_many("many-keyed", [b"x"] * 60, keys=keys)
        metas = [f.result(timeout=10) for f in futures]
        with pytest.raises(KraftError) as refused:
            producer.send_many("many", ["ok", 7])  # checked as send checks: nothing of it queued
        assert refused.value.error_code == "INVALID_RECORD"
        producer.flush(timeout=10)
    assert [m.offset for m in metas] == list(range(100)) and {m.timestamp for m in metas} == {1000}
    assert [r.value for r in stored(broker, "many", 0)] == [f"v{i}".encode() for i in range(100)]
    assert len(list(iter_batches(broker.records("many", 0)))) > 1  # batch_size still cuts batches
    for key, f in zip(keys, keyed):
        assert f.result().partition == partition_for_key(key, 6)


def test_send_many_packs_keyless_values_a_batch_at_a_time_as_sends_would(broker: FakeBroker) -> None:
    broker.create_topic("bulk", 4)
    values = [b"v%04d" % i + b"x" * (i % 50) for i in range(1000)]  # sizes vary: batches cut by bytes
    with Producer(broker.bootstrap, linger_ms=10_000, batch_size=2000, buffer_memory=5000) as producer:
        futures = producer.send_many("bulk", values, timestamp_ms=1234)
        producer.flush(timeout=10)  # buffer_memory made it wait for space on the way
    assert len(futures) == 1000 and futures[-1].index == futures[999].index
    metas = [f.result() for f in futures]
    partitions = [m.partition for m in metas]
    runs = [p for i, p in enumerate(partitions) if i == 0 or partitions[i - 1] != p]
    assert len(runs) > 10 and all(a != b for a, b in zip(runs, runs[1:]))  # KIP-480: a new batch moves on
    for p in set(partitions):
        mine = [(m.offset, v) for m, v in zip(metas, values) if m.partition == p]
        assert [offset for offset, _ in mine] == list(range(len(mine)))  # in call order
        assert [r.value for r in stored(broker, "bulk", p)] == [v for _, v in mine]
        assert {r.timestamp for r in stored(broker, "bulk", p)} == {1234}
    assert {m.timestamp for m in metas} == {1234} and [f.result() for f in futures] == metas


def test_send_many_reports_each_records_own_outcome(broker: FakeBroker) -> None:
    broker.create_topic("part", 1)
    broker.fail_next("produce", "CORRUPT_MESSAGE", partition_level=True)  # the first request's batch only
    values = [b"r%03d" % i for i in range(100)]
    with Producer(broker.bootstrap, linger_ms=10_000, batch_size=300, max_request_size=400) as producer:
        futures = producer.send_many("part", values)
        producer.flush(timeout=10)
    failed = [f.failed() for f in futures]
    first_ok = failed.index(False)
    assert 0 < first_ok < 100 and not any(failed[first_ok:])  # the failed batch's records, no other
    assert all(f.exception().error_code == "CORRUPT_MESSAGE" for f in futures[:first_ok])
    assert [f.get().offset for f in futures[first_ok:]] == list(range(100 - first_ok))
    assert [r.value for r in stored(broker, "part", 0)] == values[first_ok:]


def test_send_many_keyed_records_keep_their_order_per_partition(broker: FakeBroker) -> None:
    broker.create_topic("ordered", 3)
    keys = [f"k{i % 7}".encode() for i in range(300)]
    values = [b"%d" % i for i in range(300)]
    with Producer(broker.bootstrap, batch_size=400) as producer:
        futures = producer.send_many("ordered", values, keys=keys)
        metas = [f.result(timeout=10) for f in futures]
    for p in range(3):
        expected = [v for k, v, m in zip(keys, values, metas) if partition_for_key(k, 3) == p]
        assert [m.partition for k, m in zip(keys, metas) if partition_for_key(k, 3) == p] == [p] * len(expected)
        assert [r.value for r in stored(broker, "ordered", p)] == expected


def test_send_many_names_the_bad_record_and_queues_nothing(broker: FakeBroker) -> None:
    broker.create_topic("bad", 1)
    with Producer(broker.bootstrap, max_request_size=1000) as producer:
        for values in (["ok", b"fine", 7], [b"ok", b"fine", b"x" * 2000]):
            with pytest.raises(KraftError) as refused:
                producer.send_many("bad", values)
            assert "record 2:" in refused.value.message
        with pytest.raises(KraftError, match="INVALID_TIMESTAMP"):
            producer.send_many("bad", [b"ok"], timestamp_ms=-1)
        producer.send_many("bad", [b"last"])
        producer.flush(timeout=10)
    assert [r.value for r in stored(broker, "bad", 0)] == [b"last"]


def test_record_futures_read_as_a_list_of_each_records_future() -> None:
    tp = TopicPartition("t", 0)
    a, b = ProduceResult(tp), ProduceResult(TopicPartition("t", 1))
    futures = RecordFutures(7)
    futures.add(a, 4, 2)
    futures.add(a, 6, 1)  # goes on in the same run
    futures.add(b, 0, 2)
    assert len(futures) == 5 and list(futures.runs()) == [(a, 4, 3), (b, 0, 2)]
    expected = [(a, 4), (a, 5), (a, 6), (b, 0), (b, 1)]
    assert [(f.produce_result, f.index) for f in futures] == expected
    assert [(futures[i].produce_result, futures[i].index) for i in range(5)] == expected
    assert (futures[-1].produce_result, futures[-1].index) == (b, 1) and futures[2].timestamp == 7
    assert [(f.produce_result, f.index) for f in futures[1:4]] == expected[1:4]
    a.complete(100)
    b.complete(-1, error=KraftError("CORRUPT_MESSAGE", "bad"))
    assert [f.get().offset for f in futures[:3]] == [104, 105, 106]
    assert all(f.exception().error_code == "CORRUPT_MESSAGE" for f in futures[3:])


def test_keyless_records_stick_to_one_partition_per_batch(broker: FakeBroker) -> None:
    broker.create_topic("s", 4)
    with Producer(broker.bootstrap, linger_ms=10_000, batch_size=1000) as producer:
        futures = [producer.send("s", b"x" * 100) for _ in range(60)]
        producer.flush(timeout=10)
    partitions = [f.result().partition for f in futures]
    runs = [p for i, p in enumerate(partitions) if i == 0 or partitions[i - 1] != p]
    assert len(runs) >= 5  # ~8 records per 1000-byte batch, then the partition switches
    assert all(a != b for a, b in zip(runs, runs[1:]))
    assert len(set(partitions)) > 1


def test_retriable_errors_are_retried(broker: FakeBroker) -> None:
    broker.create_topic("r", 1)
    broker.fail_next("produce", "NOT_LEADER_OR_FOLLOWER", partition_level=True)
    broker.fail_next("produce", "NOT_ENOUGH_REPLICAS", times=2)
    with Producer(broker.bootstrap, retry_backoff_ms=10) as producer:
        meta = producer.send("r", b"hello").result(timeout=10)
    assert meta.offset == 0
    assert [r.value for r in stored(broker, "r", 0)] == [b"hello"]
    assert sum(1 for m, path, _ in broker.requests if path == "/v1/produce") == 4
    # The NOT_LEADER answer made the producer refresh its metadata.
    assert sum(1 for m, path, _ in broker.requests if path == "/v1/metadata") >= 2


def test_fatal_errors_fail_the_futures(broker: FakeBroker) -> None:
    broker.create_topic("f", 1)
    broker.fail_next("produce", "MESSAGE_TOO_LARGE", partition_level=True)
    with Producer(broker.bootstrap) as producer:
        future = producer.send("f", b"x")
        with pytest.raises(KraftError) as err:
            future.result(timeout=10)
        assert err.value.error_code == "MESSAGE_TOO_LARGE"
        assert future.exception().error_code == "MESSAGE_TOO_LARGE"
        assert producer.send("f", b"ok").result(timeout=10).offset == 0


def test_retries_stop_at_delivery_timeout(broker: FakeBroker) -> None:
    broker.create_topic("d", 1)
    broker.fail_next("produce", "NOT_ENOUGH_REPLICAS", times=1000)
    with Producer(broker.bootstrap, retry_backoff_ms=20, delivery_timeout_ms=300) as producer:
        with pytest.raises(KraftError) as err:
            producer.send("d", b"x").result(timeout=10)
    assert err.value.error_code in ("NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT")


def test_acks_zero_gives_offset_minus_one(broker: FakeBroker) -> None:
    broker.create_topic("z", 1)
    with Producer(broker.bootstrap, acks=0) as producer:
        assert producer.send("z", b"x").result(timeout=10).offset == -1
    assert len(stored(broker, "z", 0)) == 1


def test_callbacks_and_compression(broker: FakeBroker) -> None:
    broker.create_topic("c", 1)
    seen = []
    with Producer(broker.bootstrap, compression_type="zstd") as producer:
        producer.send("c", b"a" * 1000, headers={"h": "v"}).add_done_callback(lambda f: seen.append(f.result().offset))
        producer.flush(timeout=10)
    assert seen == [0]
    [record] = stored(broker, "c", 0)
    assert record.value == b"a" * 1000 and record.headers == (("h", b"v"),)


def test_send_validates_input(broker: FakeBroker) -> None:
    broker.create_topic("v", 2)
    with Producer(broker.bootstrap, max_block_ms=200, max_request_size=1000) as producer:
        for kwargs, code in [
            (dict(value=12), "INVALID_RECORD"),
            (dict(value=b"x", partition=2), "UNKNOWN_TOPIC_OR_PARTITION"),
            (dict(value=b"x" * 2000), "MESSAGE_TOO_LARGE"),
            (dict(value=b"x", headers=[("h",)]), "INVALID_RECORD"),
            (dict(value=b"x", timestamp_ms=-1), "INVALID_TIMESTAMP"),
            (dict(value=b"x", timestamp_ms=1.5), "INVALID_TIMESTAMP"),
            (dict(value=b"x", timestamp_ms=2**63), "INVALID_TIMESTAMP"),
        ]:
            with pytest.raises(KraftError) as err:
                producer.send("v", **kwargs)
            assert err.value.error_code == code
        broker.auto_create = False
        with pytest.raises(KraftError) as err:
            producer.send("missing", b"x")
        assert err.value.error_code == "UNKNOWN_TOPIC_OR_PARTITION"
        assert "auto.create.topics.enable is false" in err.value.message
    with pytest.raises(KraftError):
        producer.send("v", b"x")  # closed


def test_config_validation() -> None:
    assert parse_acks("all") == -1 and parse_acks(1) == 1 and parse_acks("-1") == -1
    with pytest.raises(KraftError) as err:
        parse_acks("2")
    assert err.value.error_code == "INVALID_REQUIRED_ACKS"
    with pytest.raises(KraftError) as err:
        Producer("127.0.0.1:1", compression_type="brotli")
    assert err.value.error_code == "INVALID_CONFIG"
    with pytest.raises(KraftError):
        Consumer("127.0.0.1:1", auto_offset_reset="middle")
    assert to_bytes("é", "v") == "é".encode() and to_bytes(bytearray(b"a"), "v") == b"a"
    assert normalize_headers([("a", None), ("b", "x")]) == (("a", None), ("b", b"x"))


def _produce(broker: FakeBroker, topic: str, partitions: int, n: int) -> None:
    broker.create_topic(topic, partitions)
    with Producer(broker.bootstrap) as producer:
        for i in range(n):
            producer.send(topic, f"v{i}", key=f"k{i}", timestamp_ms=10_000 + i)


def test_consumer_reads_everything_from_the_beginning(broker: FakeBroker) -> None:
    _produce(broker, "c", 3, 300)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", max_poll_records=50) as consumer:
        tps = consumer.partitions_for_topic("c")
        consumer.assign(tps)
        got = []
        for _ in range(100):
            batch = consumer.poll(timeout_ms=1000)
            assert sum(len(v) for v in batch.values()) <= 50
            got.extend(r for records in batch.values() for r in records)
            if len(got) >= 300:
                break
        assert sorted(int(r.value[1:]) for r in got) == list(range(300))
        for tp in tps:
            offsets = [r.offset for r in got if r.partition == tp.partition]
            assert offsets == list(range(len(offsets)))
            assert consumer.position(tp) == broker.end_offset("c", tp.partition)
        assert consumer.poll(timeout_ms=0) == {}


def test_seek_positions_and_iteration(broker: FakeBroker) -> None:
    _produce(broker, "s", 1, 20)
    tp = TopicPartition("s", 0)
    with Consumer(broker.bootstrap, consumer_timeout_ms=300) as consumer:
        consumer.assign([tp])
        assert consumer.assignment() == {tp}
        assert consumer.position(tp) == 20  # default reset: latest
        consumer.seek(tp, 15)
        assert [r.offset for r in consumer] == [15, 16, 17, 18, 19]
        consumer.seek_to_beginning()
        first = consumer.poll(timeout_ms=1000, max_records=3)[tp]
        assert [r.offset for r in first] == [0, 1, 2] and first[0].key == b"k0"
        assert consumer.position(tp) == 3  # only past records returned, not past the buffer
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 20
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 20}
        found = consumer.offsets_for_times({tp: 10_005})
        assert found[tp] is not None and found[tp].offset == 5 and found[tp].timestamp == 10_005
        assert consumer.offsets_for_times({tp: 99_999}) == {tp: None}


def test_out_of_range_resets_or_raises(broker: FakeBroker) -> None:
    _produce(broker, "o", 1, 5)
    tp = TopicPartition("o", 0)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        records = consumer.poll(timeout_ms=2000)  # out of range, reset, fetch again
        assert [r.offset for r in records[tp]] == [0, 1, 2, 3, 4]
    with Consumer(broker.bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        with pytest.raises(KraftError) as err:
            consumer.poll(timeout_ms=100)
        assert err.value.error_code == "OFFSET_OUT_OF_RANGE"
        consumer.seek(tp, 1000)
        with pytest.raises(KraftError) as err:
            consumer.poll(timeout_ms=100)
        assert err.value.error_code == "OFFSET_OUT_OF_RANGE"


def test_consumer_retries_fetch_after_leader_errors(broker: FakeBroker) -> None:
    _produce(broker, "l", 1, 3)
    tp = TopicPartition("l", 0)
    broker.fail_next("fetch", "NOT_LEADER_OR_FOLLOWER", partition_level=True)
    broker.fail_next("fetch", "NETWORK_EXCEPTION")
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10) as consumer:
        consumer.assign([tp])
        got = []
        for _ in range(20):
            got += consumer.poll(timeout_ms=200).get(tp, [])
            if len(got) == 3:
                break
        assert [r.value for r in got] == [b"v0", b"v1", b"v2"]


def test_poll_without_assignment_is_an_error(broker: FakeBroker) -> None:
    with Consumer(broker.bootstrap) as consumer:
        with pytest.raises(KraftError) as err:
            consumer.poll()
        assert err.value.error_code == "INVALID_REQUEST"
        with pytest.raises(KraftError):
            consumer.seek(TopicPartition("x", 0), 1)


def test_admin_round_trip(broker: FakeBroker) -> None:
    with Admin(broker.bootstrap) as admin:
        created = admin.create_topic("a", partitions=2, configs={"retention.ms": 1000})
        assert created.partitions == 2 and created.configs == {"retention.ms": "1000"}
        with pytest.raises(KraftError) as err:
            admin.create_topic("a")
        assert err.value.error_code == "TOPIC_ALREADY_EXISTS"
        assert [t.name for t in admin.list_topics()] == ["a"]
        d = admin.describe_topic("a")
        assert [p.partition for p in d.partitions] == [0, 1] and d.replication_factor == 1
        assert d.partitions[0].leader == 1 and d.partitions[0].isr == (1,)
        assert admin.create_partitions("a", 3) == 3
        assert admin.alter_configs("a", {"retention.ms": None, "cleanup.policy": "compact"}) == {"cleanup.policy": "compact"}
        assert admin.describe_configs("a").defaults == {"retention.ms": "604800000"}
        cluster = admin.describe_cluster()
        assert cluster.cluster_id == "fake-cluster" and cluster.controller_id == 1
        assert [b.port for b in cluster.brokers] == [broker.port]
        offsets = admin.list_offsets({TopicPartition("a", 0): "latest"})
        assert offsets[TopicPartition("a", 0)].offset == 0
        admin.delete_topic("a")
        with pytest.raises(KraftError) as err:
            admin.describe_topic("a")
        assert err.value.error_code == "UNKNOWN_TOPIC_OR_PARTITION"


def test_bootstrap_falls_back_to_the_next_server(broker: FakeBroker) -> None:
    broker.create_topic("b", 1)
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with Admin(f"127.0.0.1:{dead},{broker.bootstrap}") as admin:
        assert [t.name for t in admin.list_topics()] == ["b"]
    with Admin(f"127.0.0.1:{dead}", api_timeout_ms=300, retry_backoff_ms=50) as admin:
        with pytest.raises(KraftError) as err:
            admin.list_topics()
        assert err.value.error_code == "NETWORK_EXCEPTION"


def test_full_buffer_blocks_send_until_batches_drain(broker: FakeBroker) -> None:
    broker.create_topic("m", 1)
    # Linger is far longer than the test and no batch fills: only the full buffer makes it send.
    with Producer(broker.bootstrap, linger_ms=600_000, buffer_memory=2000, batch_size=100_000, max_block_ms=5000) as producer:
        futures = [producer.send("m", b"x" * 100) for _ in range(50)]
        assert futures[0].result(timeout=10).offset == 0
    assert broker.end_offset("m", 0) == 50


def test_plain_sends_into_an_open_batch_skip_the_general_path(broker: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """`send`'s fast path (a keyless bytes value into the open batch: the bench's and most
    applications' send) takes the record without `_prepare`/`_append`, and stores the same
    records the general path would; a serializer, a key or a closed producer go the general way."""
    broker.create_topic("fast", 1)
    calls = []
    prepare = Producer._prepare
    monkeypatch.setattr(Producer, "_prepare", lambda self, *a: calls.append(a) or prepare(self, *a))
    with Producer(broker.bootstrap, linger_ms=10_000, batch_size=100_000) as producer:
        futures = [producer.send("fast", b"v%d" % i) for i in range(100)]
        assert len(calls) == 1  # the first record opens the batch; the other 99 join it directly
        producer.flush(timeout=10)
    assert [f.result().offset for f in futures] == list(range(100))
    assert [r.value for r in stored(broker, "fast", 0)] == [b"v%d" % i for i in range(100)]
    assert all(r.key is None and r.headers == () for r in stored(broker, "fast", 0))
    with pytest.raises(KraftError) as closed:
        producer.send("fast", b"x")
    assert closed.value.error_code == "INVALID_REQUEST"
    with Producer(broker.bootstrap, value_serializer=lambda v: v.upper()) as upper:
        upper.send("fast", b"a")
        upper.send("fast", b"b").result(timeout=10)
    assert [r.value for r in stored(broker, "fast", 0)][-2:] == [b"A", b"B"]

"""One partition written through both APIs (issues 23 and 25): confluent-kafka's producer stores
Kafka's v2 batches as sent and kraft's HTTP producer kraft's batches, in turns, on a real 3-node
cluster with RF 3; transactions of either client abort and commit; the leader is killed -9 (and
later the next one, after the first came back through segment recovery). Both APIs read back
everything acknowledged, in order (read_uncommitted and read_committed; the JSON route too), and
the replicas hold the same bytes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness import REPLICATION_OVERRIDES, Cluster, partition_offsets, partition_state, raw_log, read_values, wait_for
from kraft.api.client import Consumer as HttpConsumer
from kraft.api.client import Producer as HttpProducer
from kraft.api.client import TopicPartition as HttpTopicPartition
from kraft.log.batch import iter_batches

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402

TOPIC = "mixed"
ROUNDS = 4
PER_ROUND = 200
TIMEOUT_S = 120


@pytest.mark.cluster
@pytest.mark.timeout(400)
def test_a_partition_written_by_both_apis_survives_leader_kills_and_reads_in_order(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True, overrides=REPLICATION_OVERRIDES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, 1, 3)
        cluster.wait_full_isr([TOPIC])
        first_leader = partition_state(cluster, 1, TOPIC)["leader"]
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        urls = [n.bootstrap for n in cluster.nodes.values()]  # one port serves HTTP and Kafka
        kafka = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                          "linger.ms": 5, "message.timeout.ms": TIMEOUT_S * 1000})
        http = HttpProducer(urls, acks="all", enable_idempotence=True)
        committed: list[str] = []  # what read_committed must show, in order
        written: list[str] = []  # what read_uncommitted must show, in order
        try:
            for round_no in range(ROUNDS):
                if round_no == 2:
                    cluster.kill(first_leader)
                for tag, produce in (("kafka", _kafka_round(kafka)), ("http", _http_round(http))):
                    values = [f"{tag}-{round_no}-{i}" for i in range(PER_ROUND)]
                    produce(values)
                    committed += values
                    written += values
            for tag, txn in (("kafka-txn", _kafka_transaction(bootstrap)), ("http-txn", _http_transaction(urls))):
                for commit in (False, True):
                    values = [f"{tag}-{'commit' if commit else 'abort'}-{i}" for i in range(20)]
                    txn(values, commit)
                    written += values
                    if commit:
                        committed += values
        finally:
            kafka.flush(30)
            http.close()

        cluster.restart(first_leader)  # segment recovery after kill -9
        cluster.wait_full_isr([TOPIC], timeout=TIMEOUT_S)
        second_leader = partition_state(cluster, first_leader, TOPIC)["leader"]
        cluster.kill(second_leader)
        wait_for(lambda: partition_state(cluster, first_leader, TOPIC)["leader"] not in (second_leader, -1, None),
                 TIMEOUT_S, what="a leader after the second kill")
        survivors = cluster.running()
        end = wait_for(lambda: _settled_end(cluster), TIMEOUT_S, what="the high watermark at the log end")

        live = ",".join(n.bootstrap for n in survivors)
        live_urls = [n.bootstrap for n in survivors]
        assert _kafka_read(live, "read_uncommitted", end) == written
        assert _kafka_read(live, "read_committed", end) == committed
        assert _http_read(live_urls, "read_uncommitted", end) == written
        assert _http_read(live_urls, "read_committed", end) == committed
        assert [v for _, v in read_values(survivors[0].url, TOPIC, 0, end)] == written  # the JSON route

        cluster.restart(second_leader)
        cluster.wait_full_isr([TOPIC], timeout=TIMEOUT_S)  # caught up to the high watermark, `end`
        cluster.stop()  # clean shutdown: logs comparable on disk
    raw = [raw_log(cluster.node(i).data_dir / f"{TOPIC}-0", end) for i in (1, 2, 3)]
    assert raw[0] == raw[1] == raw[2]
    assert {h.magic for _, h in iter_batches(raw[0])} == {2, 0x4B}  # each stored as its writer sent it


def _kafka_round(producer: Producer):
    def produce(values: list[str]) -> None:
        failures: list[object] = []
        for value in values:
            producer.produce(TOPIC, value=value.encode(), partition=0,
                             on_delivery=lambda err, _msg: err is not None and failures.append(err))
            producer.poll(0)
        assert producer.flush(TIMEOUT_S) == 0
        assert not failures, failures[:5]
    return produce


def _http_round(producer: HttpProducer):
    def produce(values: list[str]) -> None:
        futures = [producer.send(TOPIC, value=value.encode(), partition=0) for value in values]
        producer.flush(TIMEOUT_S)
        for future in futures:
            future.get(TIMEOUT_S)
    return produce


def _kafka_transaction(bootstrap: str):
    def run(values: list[str], commit: bool) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"k-{commit}", "linger.ms": 5})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        for value in values:
            producer.produce(TOPIC, value=value.encode(), partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
    return run


def _http_transaction(urls: list[str]):
    def run(values: list[str], commit: bool) -> None:
        producer = HttpProducer(urls, transactional_id=f"h-{commit}")
        try:
            producer.init_transactions()
            producer.begin_transaction()
            for value in values:
                producer.send(TOPIC, value=value.encode(), partition=0)
            producer.flush(TIMEOUT_S)
            (producer.commit_transaction if commit else producer.abort_transaction)()
        finally:
            producer.close()
    return run


def _settled_end(cluster: Cluster) -> int | None:
    """The log end of the partition once its leader's high watermark reached it."""
    for node in cluster.running():
        state = partition_state(cluster, node.node_id, TOPIC)
        if state["leader"] == node.node_id:
            offsets = partition_offsets(node, TOPIC)
            if offsets.get("high_watermark") == offsets.get("log_end_offset"):
                return offsets["high_watermark"]
    return None


def _kafka_read(bootstrap: str, isolation: str, end: int) -> list[str]:
    """Every value a confluent-kafka consumer of `isolation` reads from offset 0 to the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[str] = []
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value().decode())
            elif message.error().code() == KafkaError._PARTITION_EOF and message.offset() >= end:
                break
            elif message.error().code() != KafkaError._PARTITION_EOF:
                raise KafkaException(message.error())
    finally:
        consumer.close()
    return values


def _http_read(urls: list[str], isolation: str, end: int) -> list[str]:
    consumer = HttpConsumer(bootstrap_servers=urls, isolation_level=isolation, enable_auto_commit=False)
    tp = HttpTopicPartition(TOPIC, 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(1000).values():
                values += [r.value.decode() for r in records]
        return values
    finally:
        consumer.close(autocommit=False)

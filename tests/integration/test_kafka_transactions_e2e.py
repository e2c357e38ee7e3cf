"""Kafka clients' transactions through the Kafka listener of a real node (issues 23 and 24):
confluent-kafka's transactional producer writes to three partitions and a group's offset in one
transaction; a commit shows all of it to read_committed readers (a confluent-kafka consumer and
the HTTP Consumer) and the offset to the group, an abort none of it (read_uncommitted still reads
the aborted records); a second producer of the same transactional.id fences the first; kafka-python's
and aiokafka's transactional producers commit and abort; `kraft transactions` shows the Kafka
client's transactional id."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import socket
import subprocess
import sys
import uuid
from typing import Any

import pytest
import requests

from kio.index import load_request_schema

from harness import NodeProcess, shutdown_all, start_node, wait_for
from kafka_wire import read_frame_blocking, read_response, request_bytes
from kraft.kafka.entities import build
from transactions_support import committed_values, group_offset

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 3
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("kafka-txn"), transaction_state_log_num_partitions=3,
                   offsets_topic_num_partitions=3)
    yield n
    shutdown_all([n])


def new_topic(node: NodeProcess) -> str:
    name = f"kt-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})  # held until the answer comes
    admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])[name].result(TIMEOUT_S)
    return name


def transactional_producer(node: NodeProcess, tid: str) -> Producer:
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": tid, "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    return producer


def produce_everywhere(producer: Producer, topic: str, tag: str) -> None:
    for p in range(PARTITIONS):
        producer.produce(topic, value=f"{tag}-{p}".encode(), partition=p)
    assert producer.flush(TIMEOUT_S) == 0


def kafka_values(node: NodeProcess, topic: str, isolation: str) -> list[str]:
    """Every value a confluent-kafka consumer of `isolation` reads from the start of each
    partition to its end (read_committed: the last stable offset), sorted."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    at_end: set[int] = set()
    try:
        wait_for(lambda: _poll(consumer, values, at_end), TIMEOUT_S, what=f"the {isolation} end of {topic}")
    finally:
        consumer.close()
    return sorted(values)


def _poll(consumer: Consumer, values: list[str], at_end: set[int]) -> bool:
    message = consumer.poll(0.5)
    if message is not None:
        if message.error() is None:
            values.append(message.value().decode())
        elif message.error().code() == KafkaError._PARTITION_EOF:
            at_end.add(message.partition())
        else:
            raise KafkaException(message.error())
    return len(at_end) == PARTITIONS


_CORRELATION = itertools.count(1)


def wire_ask(sock: socket.socket, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """One Kafka request of plain data (kio's type of that version) and its answer."""
    request = build(load_request_schema(api_key, version), body)
    sock.sendall(request_bytes(api_key, version, next(_CORRELATION), **{
        f.name: getattr(request, f.name) for f in dataclasses.fields(request)}))
    return read_response(read_frame_blocking(sock), api_key, version)[1]


def wire_init(sock: socket.socket, tid: str) -> Any:
    """InitProducerId of `tid`, retried while the coordinator's topic is created (on first use)."""
    def init() -> Any:
        answer = wire_ask(sock, 22, 4, {"transactional_id": tid, "transaction_timeout": 60_000})
        return answer if answer.error_code.name == "none" else None

    return wait_for(init, TIMEOUT_S, what="InitProducerId (the coordinator's topic is created on first use)")


def kraft_cli(node: NodeProcess, *args: str) -> list[list[str]]:
    proc = subprocess.run([sys.executable, "-c", "from kraft.api.cli import main; main()", *args,
                           "--bootstrap-server", node.bootstrap], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return [line.split() for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_confluent_kafka_transaction_over_three_partitions_and_a_group_is_all_or_nothing(
        node: NodeProcess, commit: bool) -> None:
    topic, group, tid = new_topic(node), f"g-{uuid.uuid4().hex[:6]}", f"kafka-tx-{uuid.uuid4().hex[:6]}"
    producer = transactional_producer(node, tid)
    group_member = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        producer.begin_transaction()
        produce_everywhere(producer, topic, "a")
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 17)], group_member.consumer_group_metadata(),
                                             TIMEOUT_S)
        # written, not committed: read_committed readers see nothing yet, the group no offset
        assert kafka_values(node, topic, "read_committed") == []
        assert group_offset(node.bootstrap, group, topic) is None
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)

        written = sorted(f"a-{p}" for p in range(PARTITIONS))
        expected = written if commit else []
        assert kafka_values(node, topic, "read_committed") == expected
        assert committed_values(node.bootstrap, topic, PARTITIONS) == expected  # the HTTP Consumer
        assert kafka_values(node, topic, "read_uncommitted") == written  # aborted records too
        wait_for(lambda: group_offset(node.bootstrap, group, topic) == (17 if commit else None), TIMEOUT_S,
                 what="the group's offset")
        # the group's committed offset as a Kafka consumer fetches it (OffsetFetch; none: -1001)
        [committed] = group_member.committed([TopicPartition(topic, 0)], TIMEOUT_S)
        assert committed.offset == (17 if commit else confluent_kafka.OFFSET_INVALID)

        producer.begin_transaction()  # the producer goes on after either
        produce_everywhere(producer, topic, "b")
        producer.commit_transaction(TIMEOUT_S)
        assert kafka_values(node, topic, "read_committed") == sorted(expected + [f"b-{p}" for p in range(PARTITIONS)])
    finally:
        group_member.close()


def test_a_second_producer_of_the_transactional_id_fences_the_first(node: NodeProcess) -> None:
    topic, tid = new_topic(node), f"kafka-tx-{uuid.uuid4().hex[:6]}"
    zombie = transactional_producer(node, tid)
    zombie.begin_transaction()
    produce_everywhere(zombie, topic, "zombie")
    successor = transactional_producer(node, tid)  # aborts the zombie's open transaction
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(TIMEOUT_S)
    error = fenced.value.args[0]
    assert error.fatal() and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), error
    successor.begin_transaction()
    produce_everywhere(successor, topic, "successor")
    successor.commit_transaction(TIMEOUT_S)
    assert kafka_values(node, topic, "read_committed") == sorted(f"successor-{p}" for p in range(PARTITIONS))


def test_kafka_python_commits_a_transaction(node: NodeProcess) -> None:
    kafka = pytest.importorskip("kafka")
    topic, tid = new_topic(node), f"kafka-python-tx-{uuid.uuid4().hex[:6]}"
    producer: Any = kafka.KafkaProducer(bootstrap_servers=node.bootstrap, transactional_id=tid)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for p in range(PARTITIONS):
            producer.send(topic, value=f"kp-{p}".encode(), partition=p)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"kp-aborted", partition=0)
        producer.abort_transaction()
    finally:
        producer.close()
    assert kafka_values(node, topic, "read_committed") == sorted(f"kp-{p}" for p in range(PARTITIONS))


def test_aiokafka_commits_and_aborts_a_transaction(node: NodeProcess) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic, tid = new_topic(node), f"aiokafka-tx-{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=node.bootstrap, transactional_id=tid)
        await producer.start()
        try:
            async with producer.transaction():
                for p in range(PARTITIONS):
                    await producer.send_and_wait(topic, f"ak-{p}".encode(), partition=p)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"ak-aborted", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert kafka_values(node, topic, "read_committed") == sorted(f"ak-{p}" for p in range(PARTITIONS))
    assert "ak-aborted" in kafka_values(node, topic, "read_uncommitted")


def test_the_transactions_tool_shows_a_kafka_clients_transactional_id(node: NodeProcess) -> None:
    topic, tid = new_topic(node), f"kafka-tx-{uuid.uuid4().hex[:6]}"
    producer = transactional_producer(node, tid)
    producer.begin_transaction()
    produce_everywhere(producer, topic, "open")
    header, *rows = kraft_cli(node, "transactions", "list")
    assert [r for r in rows if r[0] == tid and r[3] == "Ongoing"], rows
    header, row = kraft_cli(node, "transactions", "describe", "--transactional-id", tid)
    assert row[1] == tid and row[4] == "Ongoing"
    assert row[-1] == ",".join(f"{topic}-{p}" for p in range(PARTITIONS))
    producer.commit_transaction(TIMEOUT_S)
    wait_for(lambda: kraft_cli(node, "transactions", "describe", "--transactional-id", tid)[1][4] == "CompleteCommit",
             TIMEOUT_S, what="the commit")


def test_a_transactional_batch_on_the_wire_needs_its_partition_added_first(node: NodeProcess) -> None:
    """Produce with a transactional id: the v2 batch's transactional bit, producer id and epoch
    reach the partition's producer state, which refuses the batch (INVALID_TXN_STATE, KIP-890)
    until AddPartitionsToTxn added the partition; then it is the transaction's first batch
    (DescribeProducers' current transaction start offset) and an abort hides it."""
    import time

    from kraft.log.batch import TRANSACTIONAL_FLAG, Record
    from kraft.log.kafka_batch import encode_batch

    topic, tid = new_topic(node), f"wire-tx-{uuid.uuid4().hex[:6]}"
    host, port = node.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        def ask(api_key: int, version: int, body: dict[str, Any]) -> Any:
            return wire_ask(sock, api_key, version, body)

        ids = wire_init(sock, tid)
        batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v")], base_offset=0,
                             attributes=TRANSACTIONAL_FLAG, producer_id=ids.producer_id,
                             producer_epoch=ids.producer_epoch, base_sequence=0)

        def produce() -> Any:
            answer = ask(0, 9, {"transactional_id": tid, "acks": -1, "timeout": 10_000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
            return answer.responses[0].partition_responses[0]

        refused = produce()
        assert refused.error_code.name == "invalid_txn_state", refused
        added = ask(24, 3, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": ids.producer_id,
                            "v3_and_below_producer_epoch": ids.producer_epoch,
                            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.name == "none"
        accepted = produce()
        assert (accepted.error_code.name, accepted.base_offset) == ("none", 0)
        producers = ask(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        [active] = producers.topics[0].partitions[0].active_producers
        assert (active.producer_id, active.producer_epoch, active.current_txn_start_offset) == \
            (ids.producer_id, ids.producer_epoch, 0)
        ended = ask(26, 3, {"transactional_id": tid, "producer_id": ids.producer_id,
                            "producer_epoch": ids.producer_epoch, "committed": False})
        assert ended.error_code.name == "none"
    wait_for(lambda: kafka_values(node, topic, "read_committed") == [], TIMEOUT_S, what="the abort")
    assert kafka_values(node, topic, "read_uncommitted") == ["v"]


def test_a_txn_offset_commit_answers_each_partition_on_its_own(node: NodeProcess) -> None:
    """Kafka's handleTxnOffsetCommitRequest: a partition that does not exist (of a topic that
    does, or of one that does not) answers UNKNOWN_TOPIC_OR_PARTITION and the others join the
    transaction (the whole commit used to be refused); the commit makes them the group's."""
    topic, group, tid = new_topic(node), f"g-{uuid.uuid4().hex[:6]}", f"tx-off-{uuid.uuid4().hex[:6]}"
    missing = f"never-{uuid.uuid4().hex[:6]}"
    host, port = node.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        def ask(api_key: int, version: int, body: dict[str, Any]) -> Any:
            return wire_ask(sock, api_key, version, body)

        ids = wire_init(sock, tid)
        producer = {"transactional_id": tid, "producer_id": ids.producer_id, "producer_epoch": ids.producer_epoch}
        # the group's FindCoordinator creates __consumer_offsets, as a client asks it first
        wait_for(lambda: ask(10, 3, {"key": group, "key_type": 0}).error_code.name == "none", TIMEOUT_S,
                 what="FindCoordinator of the group")
        wait_for(lambda: ask(25, 3, {**producer, "group_id": group}).error_code.name == "none", TIMEOUT_S,
                 what="AddOffsetsToTxn")

        def partitions(*offsets: tuple[int, int]) -> list[dict[str, Any]]:
            return [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                     "committed_metadata": ""} for p, o in offsets]

        answer = ask(28, 3, {**producer, "group_id": group, "generation_id": -1, "member_id": "",
                             "group_instance_id": None, "topics": [
                                 {"name": topic, "partitions": partitions((0, 11), (PARTITIONS + 4, 3))},
                                 {"name": missing, "partitions": partitions((0, 5))}]})
        assert {(t.name, p.partition_index): p.error_code.name for t in answer.topics for p in t.partitions} == {
            (topic, 0): "none", (topic, PARTITIONS + 4): "unknown_topic_or_partition",
            (missing, 0): "unknown_topic_or_partition"}
        ended = ask(26, 3, {**producer, "committed": True})
        assert ended.error_code.name == "none", ended
    wait_for(lambda: group_offset(node.bootstrap, group, topic) == 11, TIMEOUT_S, what="the committed offset")


def test_a_read_committed_offset_fetch_waits_for_the_transactions_end(node: NodeProcess) -> None:
    """KIP-447: OffsetFetch with require_stable (a read_committed consumer's) answers a partition
    whose transactional offset is not decided yet UNSTABLE_OFFSET_COMMIT (the client retries),
    not the older offset it would start from and process again."""
    topic, group, tid = new_topic(node), f"g-{uuid.uuid4().hex[:6]}", f"kafka-tx-{uuid.uuid4().hex[:6]}"
    producer = transactional_producer(node, tid)
    group_member = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "enable.auto.commit": False})
    host, port = node.bootstrap.split(":")
    try:
        producer.begin_transaction()
        produce_everywhere(producer, topic, "a")
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 17)], group_member.consumer_group_metadata(),
                                             TIMEOUT_S)
        with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
            def fetch(require_stable: bool) -> tuple[str, int]:
                answer = wire_ask(sock, 9, 8, {"groups": [{"group_id": group, "topics": [
                    {"name": topic, "partition_indexes": [0]}]}], "require_stable": require_stable})
                [p] = answer.groups[0].topics[0].partitions
                return p.error_code.name, p.committed_offset

            assert fetch(require_stable=True) == ("unstable_offset_commit", -1)
            assert fetch(require_stable=False) == ("none", -1)  # read_uncommitted: the last decided offset
            producer.commit_transaction(TIMEOUT_S)
            wait_for(lambda: fetch(require_stable=True) == ("none", 17), TIMEOUT_S, what="the committed offset")
    finally:
        group_member.close()


@pytest.mark.cluster
def test_a_confluent_kafka_transaction_spans_the_brokers_of_a_cluster(tmp_path) -> None:
    """Three brokers: the transactional id's coordinator, the group's and the partitions' leaders
    are spread over them, and each is found at its own Kafka endpoint (FindCoordinator, Metadata)."""
    from harness import Cluster

    overrides = {"offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
                 "min.insync.replicas": 1}
    with Cluster(tmp_path, controllers=3, combined=True, overrides=overrides) as cluster:
        cluster.start()
        first = cluster.nodes[1]
        bootstrap = ",".join(n.bootstrap for n in cluster.nodes.values())
        topic = new_topic(first)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "spread-writer"})
        producer.init_transactions(TIMEOUT_S)
        group_member = Consumer({"bootstrap.servers": bootstrap, "group.id": "spread-auditors"})
        try:
            producer.begin_transaction()
            produce_everywhere(producer, topic, "spread")
            producer.send_offsets_to_transaction([TopicPartition(topic, 0, 3)], group_member.consumer_group_metadata(),
                                                 TIMEOUT_S)
            producer.commit_transaction(TIMEOUT_S)
            assert kafka_values(first, topic, "read_committed") == sorted(f"spread-{p}" for p in range(PARTITIONS))
            wait_for(lambda: group_member.committed([TopicPartition(topic, 0)], TIMEOUT_S)[0].offset == 3, TIMEOUT_S,
                     what="the group's offset")
        finally:
            group_member.close()
        leaders = {p["leader"] for t in requests.get(f"{first.url}/v1/metadata", timeout=30).json()["topics"]
                   if t["name"] == topic for p in t["partitions"]}
        assert len(leaders) > 1  # the transaction did span brokers

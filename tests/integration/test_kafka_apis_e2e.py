"""The Kafka data-path APIs with real clients against a node's client port (HTTP and Kafka on one
port): kcat lists, produces and consumes; confluent-kafka's admin creates a topic, an idempotent
producer writes keyed records, a consumer reads them from the earliest offset and by timestamp;
kafka-python's admin creates and deletes; records cross between the Kafka and HTTP APIs both ways."""

from __future__ import annotations

import subprocess
from typing import Any
import time

import pytest
import requests

from harness import CLUSTER_SECRET, NodeProcess, shutdown_all

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = NodeProcess(node_id=1, data_dir=tmp_path_factory.mktemp("kafka-apis") / "data-1", wait_ready_on_start=True,
                    overrides={"controller.quorum.secret": CLUSTER_SECRET})
    try:
        n.start()
        yield n
    finally:
        shutdown_all([n])


def bootstrap(node: NodeProcess) -> str:
    return node.url.removeprefix("http://")


def kcat(node: NodeProcess, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["kcat", "-b", bootstrap(node), *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=True).stdout


def consume(node: NodeProcess, topic: str, partitions: list[TopicPartition], count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap(node), "group.id": "unused", "enable.auto.commit": False})
    consumer.assign(partitions)
    got, deadline = [], time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message)
    finally:
        consumer.close()
    return got


def test_kcat_lists_produces_and_consumes_and_http_reads_it_back(node: NodeProcess) -> None:
    assert "broker 1 at" in kcat(node, "-L")
    kcat(node, "-P", "-t", "kcat-topic", "-K:", stdin="k1:hello\nk2:world\n")
    out = kcat(node, "-C", "-t", "kcat-topic", "-o", "beginning", "-e", "-f", "%k=%s\n")
    assert out.split() == ["k1=hello", "k2=world"]
    answer = requests.get(f"{node.url}/v1/topics/kcat-topic/partitions/0/records", params={"offset": 0},
                          timeout=10).json()
    assert [(r["key"], r["value"]) for r in answer["records"]] == [("k1", "hello"), ("k2", "world")]


def test_confluent_kafka_admin_idempotent_producer_and_consumer(node: NodeProcess) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(node)})
    admin.create_topics([NewTopic("orders", num_partitions=3, replication_factor=1)])["orders"].result(30)
    before = int(time.time() * 1000)
    # murmur2_random: the Java client's partitioner (librdkafka's default hashes with CRC32)
    producer = Producer({"bootstrap.servers": bootstrap(node), "enable.idempotence": True,
                         "partitioner": "murmur2_random"})
    for i in range(30):
        producer.produce("orders", key=f"key-{i}".encode(), value=f"value-{i}".encode())
    assert producer.flush(30) == 0
    # keyed records land where the HTTP path's murmur2 puts them
    requests.post(f"{node.url}/v1/topics/orders/records", json={"records": [
        {"key": f"key-{i}", "value": f"http-{i}"} for i in range(30)]}, timeout=30).raise_for_status()
    got = consume(node, "orders", [TopicPartition("orders", p, 0) for p in range(3)], 60)
    by_key: dict[str, set[int]] = {}
    for m in got:
        by_key.setdefault(m.key().decode(), set()).add(m.partition())
    assert len(got) == 60 and all(len(ps) == 1 for ps in by_key.values()), by_key
    assert {m.value().decode() for m in got} >= {f"http-{i}" for i in range(30)}
    # by timestamp: every record was written after `before`
    consumer = Consumer({"bootstrap.servers": bootstrap(node), "group.id": "unused"})
    try:
        found = consumer.offsets_for_times([TopicPartition("orders", p, before) for p in range(3)], timeout=30)
    finally:
        consumer.close()
    assert all(tp.error is None and tp.offset == 0 for tp in found), found


def test_log_append_time_is_answered_to_the_producer_and_read_by_the_consumer(node: NodeProcess) -> None:
    """message.timestamp.type=LogAppendTime as Kafka: the producer's delivery report carries the
    broker's append time (ProduceResponse's log_append_time, LOG_APPEND_TIME), every record reads
    back with it, over the Kafka protocol and over HTTP."""
    admin = AdminClient({"bootstrap.servers": bootstrap(node)})
    admin.create_topics([NewTopic("appended", num_partitions=1, replication_factor=1,
                                  config={"message.timestamp.type": "LogAppendTime"})])["appended"].result(30)
    before = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap(node), "linger.ms": 50})
    reports: list[Any] = []
    for i in range(3):
        producer.produce("appended", value=b"v%d" % i, timestamp=1_000 + i,
                         on_delivery=lambda err, msg: reports.append((err, msg.timestamp())))
    assert producer.flush(30) == 0
    assert all(err is None for err, _ in reports), reports
    [(kind, appended)] = {ts for _, ts in reports}  # one batch, one append time
    assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and before <= appended <= int(time.time() * 1000)
    got = consume(node, "appended", [TopicPartition("appended", 0, 0)], 3)
    assert [m.timestamp() for m in got] == [(confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, appended)] * 3
    answer = requests.get(f"{node.url}/v1/topics/appended/partitions/0/records", params={"offset": 0},
                          timeout=10).json()
    assert [r["timestamp"] for r in answer["records"]] == [appended] * 3


def test_kafka_python_admin_creates_and_deletes(node: NodeProcess) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient, NewTopic as KpNewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(node))
    try:
        admin.create_topics([KpNewTopic("kp-topic", 2, 1)])
        assert "kp-topic" in admin.list_topics()
        admin.delete_topics(["kp-topic"])
    finally:
        admin.close()
    # its consumer fetches in an incremental fetch session (KIP-227), fetch after fetch
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap(node))
    for i in range(3):
        producer.send("kp-records", key=b"k", value=b"v%d" % i).get(timeout=30)
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap(node), enable_auto_commit=False,
                                   consumer_timeout_ms=5000)
    try:
        tp = kafka.TopicPartition("kp-records", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = [m.value for m in consumer][:3]
        producer.send("kp-records", key=b"k", value=b"v3").get(timeout=30)
        got += [m.value for m in consumer][:1]
    finally:
        consumer.close()
        producer.close()
    assert got == [b"v0", b"v1", b"v2", b"v3"]


def test_confluent_kafka_describes_and_alters_topic_configs(node: NodeProcess) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    admin = AdminClient({"bootstrap.servers": bootstrap(node)})
    admin.create_topics([NewTopic("configured", num_partitions=1, replication_factor=1)])["configured"].result(30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "configured", incremental_configs=[
        ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "configured")])
    configs = next(iter(described.values())).result(30)
    assert configs["retention.ms"].value == "86400000"
    http = requests.get(f"{node.url}/v1/topics/configured/configs", timeout=10).json()
    assert http["configs"]["retention.ms"] == "86400000"


def test_aiokafka_produces_and_consumes(node: NodeProcess) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    async def run() -> list[tuple[bytes, bytes]]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap(node))
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("aio-topic", key=b"k%d" % i, value=b"v%d" % i)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap(node), enable_auto_commit=False)
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition("aio-topic", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            async with asyncio.timeout(60):
                while len(got) < 5:
                    batch = await consumer.getmany(tp, timeout_ms=1000)
                    got += [(m.key, m.value) for m in batch.get(tp, [])]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [(b"k%d" % i, b"v%d" % i) for i in range(5)]


ADMIN, MALLORY = ("admin", "admin-secret-0xA1"), ("mallory", "mallory-secret-0xB2")


def test_an_acl_denial_is_topic_authorization_failed(tmp_path) -> None:
    """A SASL Kafka listener with ACLs on: the super user creates and writes a topic; mallory,
    with no ACL, is refused Write with TOPIC_AUTHORIZATION_FAILED and nothing of hers is stored."""
    from harness import free_port, wait_for
    sasl_port = free_port()
    n = NodeProcess(node_id=1, data_dir=tmp_path / "data-1", wait_ready_on_start=True, overrides={
        "controller.quorum.secret": CLUSTER_SECRET, "kafka.listen": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256", "super.users": "User:admin",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }, args=[arg for user, password in (ADMIN, MALLORY)
             for arg in ("--add-scram", f"SCRAM-SHA-256=[name={user},password={password}]")])

    def client(user: tuple[str, str]) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user[0], "sasl.password": user[1]}

    def produce(user: tuple[str, str]) -> list[str]:
        errors: list[str] = []
        producer = Producer({**client(user), "message.timeout.ms": 20000})
        producer.produce("payroll", value=b"x", on_delivery=lambda err, _msg: errors.append(err and err.name()))
        producer.flush(30)
        return errors

    try:
        n.start()
        admin = AdminClient(client(ADMIN))
        wait_for(lambda: _created(admin), 60, what="the super user creating payroll")
        assert produce(ADMIN) == [None]
        assert produce(MALLORY) == ["TOPIC_AUTHORIZATION_FAILED"]
        consumer = Consumer({**client(ADMIN), "group.id": "unused"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition("payroll", 0), timeout=30)
        finally:
            consumer.close()
        assert (low, high) == (0, 1)
    finally:
        shutdown_all([n])


def _created(admin: AdminClient) -> bool:
    """True once the topic exists (the credentials reach the metadata shortly after start)."""
    try:
        admin.create_topics([NewTopic("payroll", num_partitions=1, replication_factor=1)])["payroll"].result(10)
    except Exception as e:  # noqa: BLE001 - retried until the deadline
        return "TOPIC_ALREADY_EXISTS" in str(e)
    return True


def test_a_corrupt_batch_is_answered_and_a_truncated_request_closes_only_its_connection(node: NodeProcess) -> None:
    """A Produce whose batch fails its CRC answers CORRUPT_MESSAGE on its partition and appends
    nothing; a Produce cut short closes that connection only; the node keeps serving both APIs."""
    import datetime
    import socket
    import sys

    from kio.index import load_request_schema
    from kraft.log.kafka_batch import build_batch

    from kafka_wire import read_frame_blocking, read_response, request_bytes
    kcat(node, "-P", "-t", "guarded", stdin="one\n")
    batch = bytearray(build_batch([(b"k", b"v", (), int(time.time() * 1000))]))
    batch[-1] ^= 0xFF  # the last record byte: the CRC no longer matches
    schema = load_request_schema(0, 9)
    module = sys.modules[schema.__module__]
    data = module.TopicProduceData(name="guarded", partition_data=(module.PartitionProduceData(
        index=0, records=bytes(batch)),))
    produce = request_bytes(0, 9, 7, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10),
                            topic_data=(data,))
    host, port = bootstrap(node).split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(produce)
        correlation_id, answer = read_response(read_frame_blocking(sock), 0, 9)
    [partition] = answer.responses[0].partition_responses
    assert correlation_id == 7 and partition.error_code.name == "corrupt_message"
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(produce[:len(produce) // 2])
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(1) == b""  # closed without an answer
    assert kcat(node, "-C", "-t", "guarded", "-o", "beginning", "-e", "-f", "%s\n").split() == ["one"]
    assert requests.get(f"{node.url}/v1/health", timeout=10).status_code == 200


def test_records_cross_between_the_cli_and_kafka_and_kafka_requests_are_counted(node: NodeProcess) -> None:
    from click.testing import CliRunner
    from prometheus_client.parser import text_string_to_metric_families

    from kraft.api.cli import main as cli_main
    runner = CliRunner()
    produced = runner.invoke(cli_main, ["console-producer", "--bootstrap-server", bootstrap(node), "--topic",
                                        "crossing", "--property", "parse.key=true", "--property", "key.separator=:"],
                             input="c1:from-cli\n")
    assert produced.exit_code == 0, produced.output
    kcat(node, "-P", "-t", "crossing", "-K:", stdin="c2:from-kcat\n")
    assert kcat(node, "-C", "-t", "crossing", "-o", "beginning", "-e", "-f", "%k=%s\n").split() == [
        "c1=from-cli", "c2=from-kcat"]
    consumed = runner.invoke(cli_main, ["console-consumer", "--bootstrap-server", bootstrap(node), "--topic",
                                        "crossing", "--from-beginning", "--max-messages", "2",
                                        "--property", "print.key=true"])
    assert consumed.exit_code == 0 and consumed.output.splitlines()[:2] == ["c1\tfrom-cli", "c2\tfrom-kcat"], \
        consumed.output
    text = requests.get(f"{node.url}/metrics", timeout=10).text
    counted = {s.labels.get("request"): s.value for family in text_string_to_metric_families(text)
               for s in family.samples if s.name == "kafka_network_requestmetrics_requests_total"}
    assert counted.get("Produce", 0) > 0 and counted.get("FetchConsumer", 0) > 0 and counted.get("Metadata", 0) > 0


def test_an_incremental_fetch_session_answers_only_what_changed(node: NodeProcess) -> None:
    """KIP-227 on the wire: a full fetch at epoch 0 opens a session; the next fetch at epoch 1
    naming no partition answers none while nothing changed, then the partition once a record
    arrives; a wrong epoch is INVALID_FETCH_SESSION_EPOCH; epoch -1 closes the session."""
    import datetime
    import socket
    import sys

    from kio.index import load_request_schema

    from kafka_wire import read_frame_blocking, read_response, request_bytes
    kcat(node, "-P", "-t", "sessions", stdin="first\n")
    module = sys.modules[load_request_schema(1, 12).__module__]

    def fetch(sock: socket.socket, correlation_id: int, session_id: int, epoch: int, partitions: tuple) -> Any:
        topics = (module.FetchTopic(topic="sessions", partitions=partitions),) if partitions else ()
        sock.sendall(request_bytes(1, 12, correlation_id, cluster_id=None, replica_id=-1,
                                   max_wait=datetime.timedelta(milliseconds=200), min_bytes=1, max_bytes=1 << 20,
                                   isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
                                   forgotten_topics_data=(), rack_id=""))
        return read_response(read_frame_blocking(sock), 1, 12)[1]

    partition = module.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=1, last_fetched_epoch=-1,
                                      log_start_offset=-1, partition_max_bytes=1 << 20)
    host, port = bootstrap(node).split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        opened = fetch(sock, 1, 0, 0, (partition,))
        assert opened.session_id != 0 and [p.partition_index for t in opened.responses for p in t.partitions] == [0]
        quiet = fetch(sock, 2, opened.session_id, 1, ())
        assert quiet.error_code.name == "none" and quiet.responses == ()
        kcat(node, "-P", "-t", "sessions", stdin="second\n")
        news = fetch(sock, 3, opened.session_id, 2, ())
        [[answered]] = [t.partitions for t in news.responses]
        assert answered.high_watermark == 2 and answered.records
        assert fetch(sock, 4, opened.session_id, 9, ()).error_code.name == "invalid_fetch_session_epoch"
        assert fetch(sock, 5, opened.session_id, -1, (partition,)).session_id == 0
        assert fetch(sock, 6, opened.session_id, 3, ()).error_code.name == "fetch_session_id_not_found"


def test_describe_cluster_and_find_coordinator_name_the_kafka_endpoint(node: NodeProcess) -> None:
    import socket

    from kafka_wire import read_frame_blocking, read_response, request_bytes
    admin = AdminClient({"bootstrap.servers": bootstrap(node)})
    cluster = admin.describe_cluster().result(30)
    host, port = bootstrap(node).split(":")
    assert [(b.id, b.host, b.port) for b in cluster.nodes] == [(1, host, int(port))]
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request_bytes(10, 3, 1, key="a-group", key_type=0))
        _, found = read_response(read_frame_blocking(sock), 10, 3)
        sock.sendall(request_bytes(10, 3, 2, key="a-transaction", key_type=1))
        _, transaction = read_response(read_frame_blocking(sock), 10, 3)
    assert (found.error_code.name, found.node_id, found.host, found.port) == ("none", 1, host, int(port))
    # the node coordinates transactions too (its __transaction_state partition's leader)
    assert (transaction.error_code.name, transaction.node_id, transaction.port) == ("none", 1, int(port))


def test_a_producer_over_its_quota_is_told_its_throttle_time(node: NodeProcess) -> None:
    """A client id's producer_byte_rate (set with `kraft configs`) holds a Kafka producer back:
    Produce answers carry throttle_time_ms > 0 (KIP-219: the client waits that long too)."""
    from click.testing import CliRunner

    from kraft.api.cli import main as cli_main
    altered = CliRunner().invoke(cli_main, ["configs", "--bootstrap-server", bootstrap(node), "--alter",
                                            "--entity-type", "clients", "--entity-name", "kafka-slow",
                                            "--add-config", "producer_byte_rate=2048"])
    assert altered.exit_code == 0, altered.output
    throttled: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap(node), "client.id": "kafka-slow", "linger.ms": 0,
                         "throttle_cb": lambda event: throttled.append(event.throttle_time)})
    deadline = time.monotonic() + 60
    while not throttled and time.monotonic() < deadline:
        producer.produce("quota-topic", value=b"x" * 20_000)
        producer.flush(30)
        producer.poll(0)
    assert throttled and max(throttled) > 0

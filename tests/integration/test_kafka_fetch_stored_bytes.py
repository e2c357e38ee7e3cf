"""A Kafka client's Fetch serves the stored v2 batches as stored (issue 23): the `records` of a
Fetch answer through the Kafka listener are the partition's `.log` file byte for byte, at v4
(int32-sized bytes) and v12 (flexible, compact bytes), whole and from an offset inside a batch,
cut by max.partition.fetch.bytes and by the request's max_bytes, and for read_committed with an
aborted transaction (the aborted batches are served as stored, the client is told the aborted
producer). The answers are large enough (> 64 KiB) to take the path that writes the
stored bytes to the transport by reference (kraft/kafka/codec.py `response_buffers`). The
transaction markers are the one exception: the coordinator writes them in kraft's format, and a
Kafka reader gets them converted."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness import shutdown_all, start_node
from kafka_wire import read_frame_blocking, read_response, request_bytes
from kraft.kafka.codec import BY_REFERENCE
from kraft.log.batch import MAGIC_V2, iter_batches
from kraft.log.kafka_batch import from_kraft

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FETCH = 1
TIMEOUT_S = 60
WHOLE = 10 << 20


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("kafka-fetch-bytes"), transaction_state_log_num_partitions=1)
    yield n
    shutdown_all([n])


def _topic(node) -> str:
    name = f"kb-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(TIMEOUT_S)
    return name


def _produce(producer: Producer, topic: str, count: int, tag: str) -> None:
    for i in range(count):
        producer.produce(topic, b"%s-%05d-" % (tag.encode(), i) + b"v" * (100 + i % 37), partition=0)
    producer.flush(TIMEOUT_S)


def _stored(node, topic: str) -> tuple[bytes, list[tuple[int, Any]]]:
    [log_file] = sorted((Path(node.data_dir) / f"{topic}-0").glob("*.log"))
    stored = log_file.read_bytes()
    return stored, list(iter_batches(stored))


def _fetch(node, topic: str, version: int, offset: int, partition_max_bytes: int = WHOLE, max_bytes: int = WHOLE,
           isolation_level: int = 0) -> Any:
    host, port = node.bootstrap.split(":")
    partition = dict(partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                     log_start_offset=-1, partition_max_bytes=partition_max_bytes)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(request_bytes(FETCH, version, 1, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=max_bytes,
                                   isolation_level=isolation_level, session_id=0, session_epoch=-1,
                                   topics=[dict(topic=topic, partitions=[partition])], forgotten_topics_data=[],
                                   rack_id=""))
        _, response = read_response(read_frame_blocking(sock), FETCH, version)
    [[answered]] = [t.partitions for t in response.responses]
    assert answered.error_code.name == "none", answered
    return answered


@pytest.mark.parametrize("version", [4, 12])
def test_fetched_v2_batches_are_the_log_file_byte_for_byte(node, version: int) -> None:
    topic = _topic(node)
    for codec in ("none", "lz4", "zstd", "none"):  # several batches each, flushed per codec
        producer = Producer({"bootstrap.servers": node.bootstrap, "compression.type": codec, "linger.ms": 5,
                             "batch.size": 16_384})
        _produce(producer, topic, 2_000, codec)
    stored, batches = _stored(node, topic)
    assert len(stored) > 2 * BY_REFERENCE and len(batches) >= 12

    assert bytes(_fetch(node, topic, version, 0).records) == stored  # every batch, as stored
    # from inside a batch in the middle, cut by max.partition.fetch.bytes: whole batches, a slice of the file
    middle = min((i for i, (_, h) in enumerate(batches[:-6]) if h.record_count > 1),
                 key=lambda i: abs(i - len(batches) // 2))
    pos, header = batches[middle]
    end_pos, _ = batches[middle + 5]
    got = _fetch(node, topic, version, header.base_offset + 1, partition_max_bytes=end_pos - pos)
    assert bytes(got.records) == stored[pos:end_pos]
    # the request's max_bytes cuts too (fetch.max.bytes); the first batch is always whole
    end_pos, _ = batches[middle + 3]
    got = _fetch(node, topic, version, header.base_offset, max_bytes=end_pos - pos + 10)
    assert bytes(got.records) == stored[pos:end_pos]
    assert bytes(_fetch(node, topic, version, header.base_offset, max_bytes=1).records) == \
        stored[pos:batches[middle + 1][0]]


@pytest.mark.parametrize("version", [4, 12])
def test_read_committed_serves_aborted_batches_as_stored_and_names_the_aborted_producer(node, version: int) -> None:
    topic = _topic(node)
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": f"kb-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    for tag, commit in (("first", True), ("aborted", False), ("last", True)):
        producer.begin_transaction()
        _produce(producer, topic, 1_500, tag)
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
    stored, batches = _stored(node, topic)
    first_marker = next(i for i, (_, h) in enumerate(batches) if h.is_control)
    aborted_first = batches[first_marker + 1][1].base_offset  # the aborted transaction's first batch

    # the aborted batches as stored (the client drops them); the transaction markers, which the
    # coordinator writes in kraft's format, converted to v2
    expected = b"".join(bytes(stored[pos:pos + h.size_in_bytes]) if h.magic == MAGIC_V2 else from_kraft(stored, pos)
                        for pos, h in batches)
    assert sum(h.magic == MAGIC_V2 for _, h in batches) == len(batches) - 3
    got = _fetch(node, topic, version, 0, isolation_level=1)
    assert bytes(got.records) == expected
    assert [(a.producer_id, a.first_offset) for a in got.aborted_transactions] == \
        [(batches[0][1].producer_id, aborted_first)]
    assert got.last_stable_offset == got.high_watermark == batches[-1][1].next_offset

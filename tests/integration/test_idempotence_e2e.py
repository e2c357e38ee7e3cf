"""Idempotent produce against a real node: producer ids from `POST /v1/producers/init`, a batch
whose answer was lost and is sent again is written once (also after a restart), out-of-order and
fenced batches are refused with Kafka's error names; the Python producer with
`enable_idempotence=True` writes every record once when answers are lost (and without it, twice)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import msgpack
import pytest
import requests

from kraft.api.client import Admin, Consumer, Producer, TopicPartition
from kraft.api.errors import KraftError
from kraft.producer_ids import TRANSACTIONAL_ID_BASE, derived_producer_id
from harness import shutdown_all, start_node
from kraft.log.batch import build_batch

MSGPACK = "application/msgpack"


@pytest.fixture(scope="module")
def own_node(tmp_path_factory):
    """A node of its own: the test restarts it."""
    n = start_node(tmp_path_factory.mktemp("idempotence"))
    yield n
    shutdown_all([n])


def _post(node, path: str, body: Any) -> requests.Response:
    return requests.post(f"{node.url}{path}", data=msgpack.packb(body, use_bin_type=True), timeout=30,
                         headers={"Content-Type": MSGPACK, "Accept": MSGPACK})


def produce(node, topic: str, records: bytes) -> dict[str, Any]:
    r = _post(node, "/v1/produce", {"acks": -1, "timeout_ms": 10_000,
                                     "partitions": [{"topic": topic, "partition": 0, "records": records}]})
    assert r.status_code == 200, r.content
    return msgpack.unpackb(r.content, raw=False)["partitions"][0]


def values(node, topic: str) -> list[str]:
    r = requests.get(f"{node.url}/v1/topics/{topic}/partitions/0/records",
                     params={"offset": 0, "max_records": 1000}, timeout=10)
    return [x["value"] for x in r.json()["records"]]


def batch(pid: int, epoch: int, seq: int, *names: str) -> bytes:
    return build_batch([(None, n.encode(), (), 1_700_000_000_000) for n in names],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_init_producer_id_allocates_distinct_ids_or_derives_them(own_node) -> None:
    ids = [requests.post(f"{own_node.url}/v1/producers/init", timeout=30).json() for _ in range(3)]
    assert len({i["producer_id"] for i in ids}) == 3
    assert all(0 <= i["producer_id"] < TRANSACTIONAL_ID_BASE and i["producer_epoch"] == 0 for i in ids)
    derived = [requests.post(f"{own_node.url}/v1/producers/init", json={"transactional_id": "q-1"},
                             timeout=30).json() for _ in range(2)]
    assert derived[0] == derived[1] == {"producer_id": derived_producer_id("q-1"), "producer_epoch": 0}
    bad = requests.post(f"{own_node.url}/v1/producers/init", json={"transactional_id": 7}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error_code"] == "INVALID_REQUEST"
    assert "idempotence" in requests.get(f"{own_node.url}/v1/health", timeout=10).json()["features"]


def test_a_resent_batch_is_written_once_even_after_a_restart(own_node) -> None:
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    assert requests.post(f"{own_node.url}/v1/topics", json={"name": topic, "partitions": 1},
                         timeout=30).status_code == 201
    pid = requests.post(f"{own_node.url}/v1/producers/init", timeout=30).json()["producer_id"]
    first = batch(pid, 0, 0, "a", "b")
    assert produce(own_node, topic, first)["base_offset"] == 0
    again = produce(own_node, topic, first)  # the first answer was "lost": same bytes again
    assert again["base_offset"] == 0 and "error_code" not in again
    assert produce(own_node, topic, batch(pid, 0, 2, "c"))["base_offset"] == 2
    assert values(own_node, topic) == ["a", "b", "c"]

    gap = produce(own_node, topic, batch(pid, 0, 9, "x"))
    assert gap["error_code"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert produce(own_node, topic, batch(pid, 1, 0, "d"))["base_offset"] == 3  # epoch bump
    zombie = produce(own_node, topic, batch(pid, 0, 3, "z"))
    assert zombie["error_code"] == "INVALID_PRODUCER_EPOCH"

    own_node.restart()
    assert produce(own_node, topic, batch(pid, 1, 0, "d"))["base_offset"] == 3
    assert values(own_node, topic) == ["a", "b", "c", "d"]


class LosingTransport:
    """Wraps a producer's transport: every `lose`-th produce request reaches the broker, but
    its answer is replaced by a network error (the broker appended; the client cannot know)."""

    def __init__(self, transport: Any, lose: int) -> None:
        self.transport, self.lose, self.count, self.lost = transport, lose, 0, 0
        self.real_request = transport.request

    def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        answer = self.real_request(method, path, body, **kwargs)
        if path == "/v1/produce":
            self.count += 1
            if self.count % self.lose == 1:
                self.lost += 1
                raise KraftError("NETWORK_EXCEPTION", "answer lost (test)")
        return answer


@pytest.mark.parametrize("idempotent", [True, False])
def test_python_producer_with_lost_answers_writes_each_record_once(own_node, idempotent) -> None:
    topic = f"idem-py-{uuid.uuid4().hex[:8]}"
    Admin(own_node.bootstrap).create_topic(topic, partitions=2)
    producer = Producer(own_node.bootstrap, acks="all", linger_ms=1, batch_size=2_000,
                        retry_backoff_ms=20, enable_idempotence=idempotent)
    losing = LosingTransport(producer._transport, lose=2)
    producer._transport.request = losing.request
    with producer:
        futures = []
        for wave in range(12):  # flushed waves: many requests, every other answer lost
            futures += [producer.send(topic, value=b"v%04d" % i, key=b"k%d" % (i % 7))
                        for i in range(wave * 50, wave * 50 + 50)]
            producer.flush(60)
        metas = [f.result(timeout=30) for f in futures]
    assert losing.lost >= 3
    counts = Counter(r.value for p in (0, 1) for r in _read_all(own_node, topic, p))
    assert set(counts) == {b"v%04d" % i for i in range(600)}
    if not idempotent:
        assert max(counts.values()) >= 2, "without idempotence a lost answer means a duplicate"
        return
    assert set(counts.values()) == {1}
    stored = {(r.partition, r.offset): r.value for p in (0, 1) for r in _read_all(own_node, topic, p)}
    for i, meta in enumerate(metas):  # the futures carry the offsets the records are stored at
        assert stored[(meta.partition, meta.offset)] == b"v%04d" % i


def _read_all(node, topic: str, partition: int) -> list:
    consumer = Consumer(node.bootstrap)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out: list = []
    while consumer.position(tp) < end:
        out.extend(consumer.poll(timeout_ms=2000).get(tp, []))
    consumer.close()
    return out

"""Idempotent produce against a real node: producer ids from `POST /v1/producers/init`, a batch
whose answer was lost and is sent again is written once (also after a restart), out-of-order and
fenced batches are refused with Kafka's error names."""

from __future__ import annotations

import uuid
from typing import Any

import msgpack
import pytest
import requests

from api.producer_ids import TRANSACTIONAL_ID_BASE, derived_producer_id
from harness import shutdown_all, start_node
from log.batch import build_batch

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

"""The log side of transactions on a real node (issue 24): a transactional batch needs the
coordinator's verification (KIP-890), markers come through the node-only WriteTxnMarkers route,
read_committed readers (the JSON route, the batch fetch, the Python consumer, the console consumer)
see an open transaction's records only once it commits and never an aborted one's, nobody ever
sees a marker, ListOffsets latest for read_committed is the last stable offset, and kill -9 and a
restart keep all of it (the LSO and the aborted index are recovered)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from typing import Any

import msgpack
import pytest
import requests

from harness import shutdown_all, start_node, wait_for
from kraft.api.client import Consumer, TopicPartition
from kraft.log.batch import build_batch
from security_support import node_request

MSGPACK = "application/msgpack"
SECRET = "txn-log-e2e-secret"
TS = int(time.time() * 1000)  # as the markers the node stamps: one segment
TID = "txn-log-writer"  # the request's transactional id, which transactional batches need


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("txnlog"), controller_quorum_secret=SECRET)
    yield n
    shutdown_all([n])


def _post(node, path: str, body: Any) -> dict[str, Any]:
    r = requests.post(f"{node.url}{path}", data=msgpack.packb(body, use_bin_type=True), timeout=30,
                      headers={"Content-Type": MSGPACK, "Accept": MSGPACK})
    assert r.status_code == 200, r.content
    return msgpack.unpackb(r.content, raw=False)


def produce(node, topic: str, records: bytes, transactional_id: str | None = None) -> dict[str, Any]:
    return _post(node, "/v1/produce", {"acks": -1, "timeout_ms": 10_000, "transactional_id": transactional_id,
                                       "partitions": [{"topic": topic, "partition": 0, "records": records}]})["partitions"][0]


def plain(*values: str) -> bytes:
    return build_batch([(None, v.encode(), (), TS) for v in values])


def txn(pid: int, seq: int, *values: str) -> bytes:
    return build_batch([(None, v.encode(), (), TS) for v in values], producer_id=pid, producer_epoch=0,
                       base_sequence=seq, transactional=True)


def as_node(node, path: str, body: Any) -> requests.Response:
    return node_request(node.url, SECRET, node.node_id, "POST", path, body, timeout=30)


def verify(node, topic: str, pid: int) -> None:
    r = as_node(node, "/v1/partitions/txn-verify", {"producer_id": pid, "producer_epoch": 0,
                                                    "partitions": [{"topic": topic, "partition": 0}]})
    assert r.status_code == 200 and "error_code" not in msgpack.unpackb(r.content)["partitions"][0], r.content


def end_txn(node, topic: str, pid: int, commit: bool) -> int:
    r = as_node(node, "/v1/partitions/txn-markers", {"markers": [{
        "producer_id": pid, "producer_epoch": 0, "coordinator_epoch": 0,
        "transaction_result": "COMMIT" if commit else "ABORT", "partitions": [{"topic": topic, "partition": 0}]}]})
    assert r.status_code == 200, r.content
    [answer] = msgpack.unpackb(r.content)["markers"][0]["partitions"]
    assert "error_code" not in answer, answer
    return answer["offset"]


def json_values(node, topic: str, isolation: str) -> list[str]:
    """Every value the JSON route answers, page after page (from `next_offset`) to the end."""
    values, offset = [], 0
    while True:
        r = requests.get(f"{node.url}/v1/topics/{topic}/partitions/0/records",
                         params={"offset": offset, "max_records": 1000, "isolation_level": isolation}, timeout=10)
        assert r.status_code == 200, r.text
        values += [x["value"] for x in r.json()["records"]]
        if r.json()["next_offset"] == offset:
            return values
        offset = r.json()["next_offset"]


def offsets(node, topic: str) -> dict[str, int]:
    return requests.get(f"{node.url}/v1/topics/{topic}/partitions/0/offsets", timeout=10).json()


def consumer_values(node, topic: str, isolation: str) -> list[str]:
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=node.bootstrap, isolation_level=isolation, fetch_max_wait_ms=50) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[str] = []
        wait_for(lambda: consumer.position(tp) >= end or out.extend(
            r.value.decode() for rs in consumer.poll(timeout_ms=200).values() for r in rs), timeout=30)
        return out


def test_read_committed_hides_open_and_aborted_transactions_across_a_kill(node) -> None:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    assert requests.post(f"{node.url}/v1/topics", json={"name": topic, "partitions": 1}, timeout=30).status_code == 201
    pid = requests.post(f"{node.url}/v1/producers/init", timeout=30).json()["producer_id"]

    refused = produce(node, topic, txn(pid, 0, "a1"), TID)
    assert refused["error_code"] == "INVALID_TXN_STATE"  # KIP-890: not added to a transaction
    outsider = requests.post(f"{node.url}/v1/partitions/txn-verify", timeout=10, json={
        "producer_id": pid, "producer_epoch": 0, "partitions": [{"topic": topic, "partition": 0}]})
    assert outsider.status_code == 403 and outsider.json()["error_code"] == "CLUSTER_AUTHORIZATION_FAILED"
    bad_marker = requests.post(f"{node.url}/v1/partitions/txn-markers", timeout=10, json={"markers": []})
    assert bad_marker.status_code == 403  # refused before the body is even read

    produce(node, topic, plain("p0"))
    verify(node, topic, pid)
    assert produce(node, topic, txn(pid, 0, "a1", "a2"), TID)["base_offset"] == 1
    produce(node, topic, plain("p3"))
    assert json_values(node, topic, "read_committed") == ["p0"]  # stops at the open transaction
    assert json_values(node, topic, "read_uncommitted") == ["p0", "a1", "a2", "p3"]
    assert offsets(node, topic)["last_stable_offset"] == 1 and offsets(node, topic)["high_watermark"] == 4
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=node.bootstrap, isolation_level="read_committed") as consumer:
        assert consumer.end_offsets([tp]) == {tp: 1}  # ListOffsets latest: the LSO

    assert end_txn(node, topic, pid, commit=True) == 4
    assert json_values(node, topic, "read_committed") == ["p0", "a1", "a2", "p3"]  # never the marker

    verify(node, topic, pid)
    produce(node, topic, txn(pid, 2, "b1"), TID)
    assert end_txn(node, topic, pid, commit=False) == 6
    produce(node, topic, plain("p7"))
    verify(node, topic, pid)
    produce(node, topic, txn(pid, 3, "c1"), TID)  # open when the node dies
    produce(node, topic, plain("p9"))
    committed = ["p0", "a1", "a2", "p3", "p7"]
    assert json_values(node, topic, "read_committed") == committed
    assert json_values(node, topic, "read_uncommitted") == committed[:4] + ["b1", "p7", "c1", "p9"]

    node.kill()
    node.start()
    # c1's offset: the open transaction recovered (once the high watermark is back past it)
    wait_for(lambda: offsets(node, topic)["high_watermark"] == 10, timeout=30)
    assert offsets(node, topic)["last_stable_offset"] == 8
    assert json_values(node, topic, "read_committed") == committed  # b1 still aborted
    assert consumer_values(node, topic, "read_committed") == committed
    assert consumer_values(node, topic, "read_uncommitted") == committed[:4] + ["b1", "p7", "c1", "p9"]

    # the producer state survived too: c1's transaction goes on without a new verification
    produce(node, topic, txn(pid, 4, "c2"), TID)
    end_txn(node, topic, pid, commit=True)
    assert json_values(node, topic, "read_committed") == committed + ["c1", "p9", "c2"]
    console = subprocess.run(
        [sys.executable, "-m", "kraft.api.cli", "console-consumer", "--bootstrap-server", node.bootstrap,
         "--topic", topic, "--from-beginning", "--isolation-level", "read_committed", "--timeout-ms", "3000"],
        capture_output=True, text=True, timeout=60)
    assert console.stdout.split() == committed + ["c1", "p9", "c2"], console.stderr

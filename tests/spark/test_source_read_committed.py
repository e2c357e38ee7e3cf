"""The kraft source's `kraft.isolation.level` on a real local Spark and a real node: read_committed
ends at the last stable offset (an open transaction and what follows it wait) and leaves an aborted
transaction's records out; read_uncommitted reads every record; neither ever yields a marker."""

from __future__ import annotations

import time
from typing import Any

import msgpack
import pytest
import requests

from kraft.api.errors import KraftError
from kraft.log.batch import build_batch
from kraft.spark_connector.options import parse_source_options

pytestmark = pytest.mark.spark

SECRET = "spark-read-committed-secret"
PID = 777


@pytest.fixture(scope="module")
def txn_node(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from harness import shutdown_all, start_node

    node = start_node(tmp_path_factory.mktemp("spark-txn"), controller_quorum_secret=SECRET)
    yield node
    shutdown_all([node])


def _produce(node: Any, topic: str, records: bytes, transactional_id: str | None = None) -> None:
    body = {"partitions": [{"topic": topic, "partition": 0, "records": records}], "transactional_id": transactional_id}
    r = requests.post(f"{node.url}/v1/produce", timeout=30, headers={"Content-Type": "application/msgpack"},
                      data=msgpack.packb(body, use_bin_type=True))
    assert r.status_code == 200 and "error_code" not in r.json()["partitions"][0], r.text


def _as_node(node: Any, path: str, body: Any) -> None:
    from security_support import node_request

    r = node_request(node.url, SECRET, node.node_id, "POST", path, body, timeout=30)
    assert r.status_code == 200, r.content


def _values(spark: Any, node: Any, topic: str, isolation: str) -> list[bytes]:
    df = (spark.read.format("kraft").option("kraft.bootstrap.servers", node.bootstrap).option("subscribe", topic)
          .option("kraft.isolation.level", isolation).load())
    return [bytes(r.value) for r in sorted(df.collect(), key=lambda r: r.offset)]


def test_read_committed_source_skips_aborted_and_open_transactions(spark, txn_node) -> None:
    topic = f"sparktxn{int(time.time() * 1000) % 10**8}"
    assert requests.post(f"{txn_node.url}/v1/topics", json={"name": topic, "partitions": 1},
                         timeout=30).status_code == 201
    now = int(time.time() * 1000)
    tp = [{"topic": topic, "partition": 0}]

    def txn(seq: int, value: bytes) -> bytes:
        return build_batch([(None, value, None, now)], producer_id=PID, producer_epoch=0, base_sequence=seq,
                           transactional=True)

    def end(commit: bool) -> None:
        _as_node(txn_node, "/v1/partitions/txn-markers", {"markers": [{
            "producer_id": PID, "producer_epoch": 0, "coordinator_epoch": 0,
            "transaction_result": "COMMIT" if commit else "ABORT", "partitions": tp}]})

    _produce(txn_node, topic, build_batch([(None, b"p0", None, now)]))
    for seq, value, commit in ((0, b"committed", True), (1, b"aborted", False), (2, b"open", None)):
        _as_node(txn_node, "/v1/partitions/txn-verify", {"producer_id": PID, "producer_epoch": 0, "partitions": tp})
        _produce(txn_node, topic, txn(seq, value), "spark-txn-writer")
        if commit is not None:
            end(commit)
    _produce(txn_node, topic, build_batch([(None, b"after", None, now)]))
    assert _values(spark, txn_node, topic, "read_committed") == [b"p0", b"committed"]
    assert _values(spark, txn_node, topic, "read_uncommitted") == [b"p0", b"committed", b"aborted", b"open",
                                                                    b"after"]


def test_a_wrong_isolation_level_is_refused_on_the_driver() -> None:
    with pytest.raises(KraftError, match="kraft.isolation.level"):
        parse_source_options({"kraft.bootstrap.servers": "h:1", "subscribe": "t",
                              "kraft.isolation.level": "dirty"}, streaming=False)
    assert parse_source_options({"kraft.bootstrap.servers": "h:1", "subscribe": "t",
                                 "kraft.Isolation.Level": "READ_COMMITTED"}, streaming=False).isolation_level \
        == "read_committed"

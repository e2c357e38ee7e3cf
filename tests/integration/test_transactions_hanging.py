"""Hanging transactions on a real node (kafka-transactions find-hanging and abort): a producer's
transaction is open in two partitions when the node is killed -9 and the coordinator's state is
lost (`__transaction_state` wiped: a lost disk), so no coordinator will ever write their markers
and read_committed readers stop at them. `kraft transactions find-hanging` lists exactly those
(not a live transaction of the same partition), `abort` (by start offset, and by producer id and
epoch) writes their ABORT markers, and the last stable offset moves: read_committed readers get
every committed record and none of the aborted ones. KIP-664's PartitionsWithLateTransactionsCount
counts such a partition until it is aborted."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import requests
from prometheus_client.parser import text_string_to_metric_families

from harness import shutdown_all, start_node, wait_for
from kraft.api.client import Admin, Producer
from kraft.api.client.types import NewTopic
from transactions_support import committed_values, stable

TOPIC = "payments"


def kraft_cli(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from kraft.api.cli import main; main()", "transactions", *args,
                           "--bootstrap-server", node.bootstrap], capture_output=True, text=True, timeout=60)


def table(node, *args: str) -> list[list[str]]:
    proc = kraft_cli(node, *args)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return [line.split() for line in proc.stdout.splitlines()]


def open_transaction(node, transactional_id: str, partition: int, value: bytes) -> Producer:
    p = Producer(node.bootstrap, transactional_id=transactional_id, linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    p.send(TOPIC, value, partition=partition).get(timeout=30)
    return p


def metric(node, name: str, **labels: str) -> float | None:
    text = requests.get(f"{node.url}/metrics", timeout=10).text
    return next((s.value for family in text_string_to_metric_families(text) for s in family.samples
                 if s.name == name and s.labels == labels), None)


def late_transactions(node) -> float | None:
    """KIP-664's kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount."""
    return metric(node, "kafka_server_replicamanager_partitionswithlatetransactionscount")


def describe_producers_requests(node) -> float:
    return metric(node, "kafka_network_requestmetrics_requests_total", request="DescribeProducers") or 0


def test_a_hanging_transaction_counts_as_late_until_it_is_aborted(tmp_path) -> None:
    """The gauge counts a partition whose open transaction's producer last wrote more than
    transaction.max.timeout.ms + 5 minutes (20 minutes by default) ago: here its batch carries a timestamp an
    hour old, and its coordinator's state is lost so nothing aborts it."""
    node = start_node(tmp_path, transaction_state_log_num_partitions=1)
    try:
        with Admin(node.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 2, 1)])
        lost = Producer(node.bootstrap, transactional_id="lost", linger_ms=0)
        lost.init_transactions()
        lost.begin_transaction()
        an_hour_ago = int(time.time() * 1000) - 3_600_000
        lost.send(TOPIC, b"hanging", partition=1, timestamp_ms=an_hour_ago).get(timeout=30)
        node.kill()
        for directory in node.data_dir.rglob("__transaction_state-*"):
            shutil.rmtree(directory)
        node.start()
        lost.close(timeout=0)
        fresh = open_transaction(node, "fresh", 0, b"fresh")  # open, but not for long: not late

        assert wait_for(lambda: late_transactions(node) == 1, 30, what="the hanging transaction to count")
        assert table(node, "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", "0") == []
        assert wait_for(lambda: late_transactions(node) == 0, 30, what="the aborted transaction to stop counting")
        fresh.commit_transaction()
        fresh.close()
    finally:
        shutdown_all([node])


def test_hanging_transactions_are_found_and_aborted(tmp_path) -> None:
    node = start_node(tmp_path, transaction_state_log_num_partitions=1)
    try:
        with Admin(node.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 2, 1)])
        with Producer(node.bootstrap) as plain:
            for partition in (0, 1):
                plain.send(TOPIC, f"before-{partition}".encode(), partition=partition).get(timeout=30)
        lost = [open_transaction(node, f"lost-{partition}", partition, f"hanging-{partition}".encode())
                for partition in (0, 1)]
        node.kill()
        for directory in node.data_dir.rglob("__transaction_state-*"):
            shutil.rmtree(directory)
        node.start()
        for p in lost:
            p.close(timeout=0)

        live = open_transaction(node, "live", 0, b"live")  # its coordinator knows it: not hanging
        with Producer(node.bootstrap) as plain:
            for partition in (0, 1):
                plain.send(TOPIC, f"after-{partition}".encode(), partition=partition).get(timeout=30)
        assert committed_values(node.bootstrap, TOPIC, 2) == ["before-0", "before-1"]  # held at offset 1

        asked = describe_producers_requests(node)
        header, *rows = table(node, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
        assert describe_producers_requests(node) == asked + 1  # both partitions' leader asked once
        assert header == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                          "LastTimestamp", "Duration(min)"]
        assert [row[:2] + row[3:6] for row in rows] == [[TOPIC, "0", "0", "-1", "1"], [TOPIC, "1", "0", "-1", "1"]]
        hanging_pids = {row[1]: row[2] for row in rows}  # by partition
        assert str(live._txn.producer_id) not in hanging_pids.values()
        by_broker = table(node, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")
        assert [row[:7] for row in by_broker[1:]] == [row[:7] for row in rows]
        assert table(node, "find-hanging", "--topic", TOPIC)[1:] == []  # not older than 15 minutes

        nothing = kraft_cli(node, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "3")  # a plain record
        assert nothing.returncode == 1 and "Could not find any open transactions starting at offset 3" in nothing.stderr
        assert table(node, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "1") == []
        assert table(node, "abort", "--topic", TOPIC, "--partition", "1", "--producer-id", hanging_pids["1"],
                     "--producer-epoch", "0", "--coordinator-epoch", "-1") == []
        assert table(node, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")[1:] == []
        live.commit_transaction()
        live.close()
        assert stable(node.bootstrap, TOPIC, 2)  # the last stable offsets reached the high watermarks
        assert committed_values(node.bootstrap, TOPIC, 2) == ["after-0", "after-1", "before-0", "before-1", "live"]
    finally:
        shutdown_all([node])

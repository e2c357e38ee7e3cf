"""`kraft-bench produce|consume --client ...` (issue 23): the same workload through kraft's client
over HTTP and through the Kafka listener with kafka-python and confluent-kafka, in one run, against
a real node: every client's records are acknowledged and then read back by every client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from harness import NodeProcess, shutdown_all, start_node
from kraft.bench import main

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")

CLIENTS = ["kraft", "kafka-python", "confluent-kafka"]
RECORDS = 3000


@pytest.fixture
def node(tmp_path: Path):
    n = start_node(tmp_path)
    try:
        yield n
    finally:
        shutdown_all([n])


def _bench(node: NodeProcess, out: Path, *args: str) -> dict:
    clients = [arg for c in CLIENTS for arg in ("--client", c)]
    result = CliRunner().invoke(main, [*args, "--bootstrap-server", node.bootstrap, "--topic", "compared",
                                       "--json", str(out), *clients], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "the clients compared" in result.output
    return json.loads(out.read_text())


def test_produce_and_consume_with_each_client_in_one_run(node: NodeProcess, tmp_path: Path) -> None:
    produced = _bench(node, tmp_path / "produce.json", "produce", "--num-records", str(RECORDS), "--acks", "all",
                      "--compression", "lz4")
    assert [(r["client"], r["records"], r["errors"]) for r in produced["runs"]] == [
        (c, RECORDS, 0) for c in CLIENTS]
    assert all(r["p50_ms"] is not None and r["records_per_sec"] > 0 for r in produced["runs"])
    offsets = requests.get(f"{node.url}/v1/topics/compared/partitions/0/offsets", timeout=10).json()
    assert offsets["high_watermark"] == RECORDS * len(CLIENTS)

    consumed = _bench(node, tmp_path / "consume.json", "consume", "--num-records", str(RECORDS * len(CLIENTS)),
                      "--timeout-ms", "20000")
    assert [(r["client"], r["records"]) for r in consumed["runs"]] == [(c, RECORDS * len(CLIENTS)) for c in CLIENTS]
    assert all(r["mb_per_sec"] > 0 for r in consumed["runs"])


def _confluent_run(node: NodeProcess, out: Path, topic: str, *args: str) -> dict:
    result = CliRunner().invoke(main, ["produce", "--bootstrap-server", node.bootstrap, "--topic", topic,
                                       "--client", "confluent-kafka", "--json", str(out), *args],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_the_warm_up_shares_the_measured_producer(node: NodeProcess, tmp_path: Path) -> None:
    """A new idempotent librdkafka producer holds its first records until it has a producer id
    (up to its 500 ms PID timer): the warm-up is there to pay that, so the measured records come
    from the same producer, one producer id on the partition."""
    _confluent_run(node, tmp_path / "run.json", "warm", "--acks", "all", "--warmup-records", "200",
                   "--num-records", "200")
    producers = requests.get(f"{node.url}/v1/topics/warm/partitions/0/producers", timeout=10).json()["producers"]
    assert len(producers) == 1, producers


def test_a_paced_confluent_kafka_run_times_each_ack_when_it_arrives(node: NodeProcess, tmp_path: Path) -> None:
    """librdkafka's `Message.latency()` runs to the delivery report's serving: a paced run must
    serve reports while it waits, not every 1,024 records (here: only at the end, ~2 s after the
    first record, so the median record would seem to wait ~1 s for a single-digit-ms answer)."""
    run = _confluent_run(node, tmp_path / "run.json", "paced", "--acks", "1", "--throughput", "50",
                         "--num-records", "100", "--warmup-records", "10")
    assert run["records"] == 100
    assert run["p50_ms"] < run["elapsed_s"] * 1000 / 4, run


def test_trace_follows_a_kafka_clients_records_through_the_node(tmp_path: Path) -> None:
    """`--trace` with confluent-kafka: each acknowledged record's way from its `produce()` call
    through the leader's append and the produce's answer to its delivery report."""
    traced = start_node(tmp_path, stage_trace_events=100_000)
    try:
        run = _confluent_run(traced, tmp_path / "run.json", "traced", "--acks", "all", "--num-records", "300",
                             "--trace")
    finally:
        shutdown_all([traced])
    assert run["stages"]["client_send→leader_append"]["records"] == 300
    assert run["stages"]["produce_answered→client_ack"]["records"] == 300

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

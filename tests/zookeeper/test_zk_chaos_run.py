"""`kraft-bench chaos --mode zookeeper` for real: a short seeded run (kill -9 and SIGSTOP) on three
brokers in ZooKeeper mode, on a ZooKeeper server the run starts itself; the checker finds
nothing lost, duplicated by the idempotent producer, reordered or truncated after being served,
and the JSON summary says which mode ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraft.bench.chaos import JSON_KEYS
from kraft.bench.common import main
from kraft.zk.ensemble import zookeeper_available

pytestmark = [pytest.mark.zookeeper, pytest.mark.cluster, pytest.mark.slow,
              pytest.mark.skipif(not zookeeper_available(), reason="needs the Debian zookeeper package and java")]


@pytest.mark.timeout(480)
def test_fifty_seconds_of_kill_and_stop_in_zookeeper_mode_lose_nothing(tmp_path: Path) -> None:
    summary_path, history = tmp_path / "chaos.json", tmp_path / "history.jsonl"
    # seed 2 over 50 s schedules a kill and a stop
    result = CliRunner().invoke(main, ["chaos", "--mode", "zookeeper", "--duration", "50", "--faults", "kill,stop",
                                       "--seed", "2", "--history", str(history), "--json", str(summary_path)])
    assert summary_path.exists(), result.output
    summary = json.loads(summary_path.read_text())
    assert result.exit_code == 0, (result.output, summary["examples"])
    assert {"mode", "faults", "faults_not_injected", "schedule", *JSON_KEYS} <= summary.keys()
    assert summary["mode"] == "zookeeper" and summary["faults_not_injected"] == {}
    assert sorted(e["fault"] for e in summary["schedule"] if e["first_round"]) == ["kill", "stop"]
    # every requested type is injected, however long recoveries take on a loaded machine
    assert summary["faults"] == {"kill": 1, "stop": 1} and summary["not_recovered"] == 0
    assert [r["fault"] for r in summary["recoveries"]] == ["kill", "stop"]
    assert summary["acked"] > 0 and summary["seen"] > 0 and summary["commits"] > 0
    assert summary["lost"] == 0 and summary["duplicated_idempotent"] == 0 and summary["reordered"] == 0
    assert (summary["truncated_after_seen"], summary["offsets_lost"], summary["metadata_lost"]) == (0, 0, 0)
    assert summary["worker_errors"] == 0, summary["examples"]
    [run] = [e for e in map(json.loads, history.read_text().splitlines()) if e["k"] == "run"]
    assert run["mode"] == "zookeeper"

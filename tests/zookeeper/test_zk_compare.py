"""`kraft-bench compare-metadata` on ZooKeeper mode with a tiny load: every figure is measured and
the JSON has the documented shape (the KRaft side shares the `kraft-bench failover`/`metadata`
cluster code, tested with those)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraft.bench import main
from kraft.zk.compare import KEYS
from kraft.zk.ensemble import zookeeper_available

pytestmark = [pytest.mark.zookeeper, pytest.mark.cluster,
              pytest.mark.skipif(not zookeeper_available(), reason="needs the Debian zookeeper package and java")]


@pytest.mark.timeout(300)
def test_compare_metadata_measures_zookeeper_mode(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    result = CliRunner().invoke(main, ["compare-metadata", "--mode", "zookeeper", "--runs", "1", "--partitions", "50",
                                       "--samples", "3", "--zk-session-timeout-ms", "2000", "--zk-servers", "3",
                                       "--json", str(out)])
    assert result.exit_code == 0, result.output
    answer = json.loads(out.read_text())
    assert list(answer) == ["zookeeper"]
    figures = answer["zookeeper"]
    assert all(figures[k] > 0 for k in KEYS), figures
    assert figures["zookeeper_session_timeout_ms"] == 2000 and figures["partitions"] == 50
    assert "controller_failover_s" in result.output

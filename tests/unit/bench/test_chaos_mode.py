"""`kraft-bench chaos --mode`: the option reaches the run (same seeded schedule and workload in
either mode), the JSON says which mode ran, and a ZooKeeper-mode cluster is started without a
Raft quorum or --role, on a ZooKeeper connect string, with the ZooKeeper session as its session."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import kraft.bench.chaos as chaos_command
from kraft.bench.chaos.checker import Findings
from kraft.bench.chaos.run import ChaosOptions, ChaosOutcome, _overrides, run_chaos
from kraft.bench.chaos.schedule import make_schedule
from kraft.bench.cluster import LocalCluster
from kraft.bench.common import main
from kraft.zk.ensemble import tick_ms_for


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[ChaosOptions]:
    """The options each `kraft-bench chaos --duration` would run with (no cluster started)."""
    seen: list[ChaosOptions] = []

    def fake_run(options: ChaosOptions, echo: Any) -> ChaosOutcome:
        seen.append(options)
        schedule = make_schedule(options.seed, options.duration_s, options.faults, list(range(1, options.nodes + 1)))
        return ChaosOutcome(Findings(faults={"kill": 1}), schedule, {}, options.history_path, 0, 0)

    monkeypatch.setattr(chaos_command, "run_chaos", fake_run)
    monkeypatch.setattr(chaos_command, "zookeeper_available", lambda: True)
    return seen


def _chaos(*args: str) -> Any:
    return CliRunner().invoke(main, ["chaos", *args])


def test_mode_reaches_the_run_and_the_json(runs: list[ChaosOptions], tmp_path: Path) -> None:
    common = ["--duration", "120", "--faults", "kill,stop,partition", "--seed", "7",
              "--history", str(tmp_path / "h.jsonl")]
    summaries = {}
    for mode in ("kraft", "zookeeper"):
        out = tmp_path / f"{mode}.json"
        result = _chaos(*common, "--mode", mode, "--json", str(out))
        assert result.exit_code == 0, result.output
        summaries[mode] = json.loads(out.read_text())
    kraft, zookeeper = runs
    assert (kraft.mode, zookeeper.mode) == ("kraft", "zookeeper")
    assert {**vars(kraft), "mode": "zookeeper"} == vars(zookeeper)  # nothing else differs
    assert summaries["kraft"]["mode"] == "kraft" and summaries["zookeeper"]["mode"] == "zookeeper"
    # the same seeded schedule in both modes
    assert summaries["kraft"]["schedule"] == summaries["zookeeper"]["schedule"] != []
    assert summaries["zookeeper"]["faults_not_injected"] == {}
    assert _chaos(*common).exit_code == 0 and runs[-1].mode == "kraft"  # the default


def test_bad_mode_and_rounds_in_zookeeper_mode_are_usage_errors(runs: list[ChaosOptions]) -> None:
    assert _chaos("--duration", "60", "--mode", "zk").exit_code == 2
    result = _chaos("--rounds", "1", "--mode", "zookeeper")
    assert result.exit_code == 2 and "KRaft mode only" in result.output
    assert runs == []
    with pytest.raises(ValueError, match="unknown mode"):
        run_chaos(ChaosOptions(60, ["kill"], 1, "unused", mode="zk"), print)


def test_zookeeper_mode_without_zookeeper_says_so(monkeypatch: pytest.MonkeyPatch, runs: list[ChaosOptions]) -> None:
    monkeypatch.setattr(chaos_command, "zookeeper_available", lambda: False)
    result = _chaos("--duration", "60", "--mode", "zookeeper")
    assert result.exit_code == 1 and "Debian zookeeper package" in result.output and runs == []


def test_zookeeper_session_is_the_broker_session() -> None:
    kraft = _overrides(ChaosOptions(60, ["kill"], 1, "h", session_timeout_ms=3000))
    zookeeper = _overrides(ChaosOptions(60, ["kill"], 1, "h", session_timeout_ms=3000, mode="zookeeper"))
    assert "zookeeper.session.timeout.ms" not in kraft
    assert zookeeper == {**kraft, "zookeeper.session.timeout.ms": 3000}
    assert tick_ms_for(3000) == 150 and tick_ms_for(1000) == 100  # a server accepts up to 20 ticks


def test_zookeeper_mode_cluster_has_no_quorum_and_no_role(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []

    class FakePopen:
        def __init__(self, command: list[str], **_: Any) -> None:
            commands.append(command)

    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    cluster = LocalCluster(3, overrides={"min.insync.replicas": 2}, root=tmp_path,
                           zookeeper_connect="127.0.0.1:2181/kraft-chaos")
    for node in cluster.nodes.values():
        node.start()
    assert len(commands) == 3
    for command in commands:
        assert "--role" not in command and "--controller-quorum" not in command
        assert "--controller-listen" not in command
        assert command[command.index("--zookeeper-connect") + 1] == "127.0.0.1:2181/kraft-chaos"
        assert "min.insync.replicas=2" in command
    assert all(node.roles == "controller,broker" for node in cluster.nodes.values())
    kraft = LocalCluster(3, root=tmp_path)
    kraft.nodes[1].start()
    assert "--role" in commands[-1] and "--controller-quorum" in commands[-1]
    assert "--zookeeper-connect" not in commands[-1]

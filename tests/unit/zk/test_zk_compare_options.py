"""`kraft-bench compare-metadata`'s options that measure nothing: the sweep list, merging earlier
runs (`--from-json`), the plot (`--plot`, matplotlib), the refusals that come before an hour
of measuring, the ports (`--port-range`) and kazoo's log lines."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Iterator

import click
import pytest
from click.testing import CliRunner

from kraft.bench import main
from kraft.bench.cluster import LocalCluster, PortRange, free_port, use_port_range
from kraft.zk.compare import ZkLocalCluster, merge_results
from kraft.zk.ensemble import route_kazoo_logging

RUN = {
    "kraft": {"controller_failover_s": 0.6, "controller_load_s": 0.06, "partitions": 10000, "runs": 3,
              "broker_session_timeout_ms": 9000, "sweep": [
                  {"partitions": 1000, "controller_failover_s": 1.0, "controller_load_s": 0.2,
                   "create_partitions_from": 0, "create_partitions_s": 0.7},
                  {"partitions": 10000, "controller_failover_s": 0.6, "controller_load_s": 0.06,
                   "create_partitions_from": 1000, "create_partitions_s": 10.0}]},
    "zookeeper": {"controller_failover_s": 20.5, "controller_load_s": 4.3, "partitions": 10000, "runs": 3,
                  "zookeeper_session_timeout_ms": 18000, "sweep": [
                      {"partitions": 1000, "controller_failover_s": 18.9, "controller_load_s": 0.8,
                       "create_partitions_from": 0, "create_partitions_s": 8.2},
                      {"partitions": 10000, "controller_failover_s": 20.5, "controller_load_s": 4.3,
                       "create_partitions_from": 1000, "create_partitions_s": 29.7}]},
}


def invoke(*args: str) -> object:
    return CliRunner().invoke(main, ["compare-metadata", *args])


def test_merged_runs_keep_every_sweep_point_and_the_later_figures() -> None:
    later = {"zookeeper": {"controller_failover_s": 25.0, "partitions": 30000, "sweep": [
        {"partitions": 30000, "controller_failover_s": 25.0, "controller_load_s": 9.0},
        {"partitions": 1000, "controller_failover_s": 19.5, "controller_load_s": 0.9}]}}
    merged = merge_results([RUN, later])
    assert merged["kraft"] == RUN["kraft"]
    zk = merged["zookeeper"]
    assert zk["controller_failover_s"] == 25.0 and zk["zookeeper_session_timeout_ms"] == 18000
    assert [(p["partitions"], p["controller_failover_s"]) for p in zk["sweep"]] == [
        (1000, 19.5), (10000, 20.5), (30000, 25.0)]


def test_from_json_prints_the_tables_and_draws_the_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = tmp_path / "run.json"
    data.write_text(json.dumps(RUN))
    png = tmp_path / "plot.png"
    result = invoke("--from-json", str(data), "--plot", str(png))
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "controller_failover_s" in result.output and "partition sweep" in result.output  # type: ignore[attr-defined]
    assert "│ 10000      │ 0.6 " in result.output  # type: ignore[attr-defined]


def test_a_plot_needs_sweep_figures(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = tmp_path / "run.json"
    data.write_text(json.dumps({m: {k: v for k, v in f.items() if k != "sweep"} for m, f in RUN.items()}))
    result = invoke("--from-json", str(data), "--plot", str(tmp_path / "plot.png"))
    assert result.exit_code == 1 and "no --partitions-sweep figures" in result.output  # type: ignore[attr-defined]


def test_refusals_before_measuring() -> None:
    result = invoke("--plot", "x.png")
    if "needs matplotlib" not in result.output:  # type: ignore[attr-defined]
        assert result.exit_code == 2 and "give --partitions-sweep" in result.output  # type: ignore[attr-defined]
    result = invoke("--partitions", "10", "--partitions-sweep", "10,20")
    assert result.exit_code == 2 and "not both" in result.output  # type: ignore[attr-defined]
    result = invoke("--partitions-sweep", "10,x")
    assert result.exit_code == 2 and "separated by commas" in result.output  # type: ignore[attr-defined]


def test_plot_without_matplotlib_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = invoke("--partitions-sweep", "10,20", "--plot", str(tmp_path / "p.png"))
    assert result.exit_code == 1 and "pip install 'kraft[bench]'" in result.output  # type: ignore[attr-defined]


@pytest.fixture
def port_range() -> Iterator[None]:
    yield
    use_port_range(None)  # the process-wide setting --port-range makes


def test_port_range_puts_every_listener_of_both_clusters_in_it(port_range: None) -> None:
    """--port-range (as failover and metadata take it): the ZooKeeper servers' client, peer and
    election ports, the nodes' client and Raft ports all come from it; a range too small says so."""
    result = invoke("--port-range", "30000-29000", "--from-json", "missing.json")
    assert result.exit_code == 2 and "LOW-HIGH" in result.output  # type: ignore[attr-defined]
    use_port_range(PortRange.parse("31000-31099"))
    zookeeper = ZkLocalCluster(3, 3, 2000)
    kraft = LocalCluster(3, combined=True)
    try:
        ensemble = zookeeper.ensemble
        ports = [*ensemble.client_ports, *(p for pair in ensemble.peer_ports for p in pair),
                 *(n.port for n in zookeeper.nodes.values()), *(n.port for n in kraft.nodes.values()),
                 *(int(a.split(":")[-1]) for n in kraft.nodes.values() for a in n.args if a.startswith("127.0.0.1:"))]
        assert len(ports) == 3 + 6 + 3 + 3 + 3 and len(set(ports)) == len(ports)
        assert all(31000 <= p <= 31099 for p in ports), ports
        use_port_range(PortRange.parse("31200-31201"))
        free_port(), free_port()
        with pytest.raises(click.ClickException, match="no free port left in --port-range 31200-31201"):
            free_port()
    finally:
        for cluster in (zookeeper, kraft):
            shutil.rmtree(cluster.root, ignore_errors=True)


def test_kazoo_connection_retries_are_debug_lines_in_the_bench_format(capsys: pytest.CaptureFixture[str]) -> None:
    kazoo = logging.getLogger("kazoo")
    saved = (kazoo.handlers[:], kazoo.level, kazoo.propagate)
    try:
        route_kazoo_logging()
        client = logging.getLogger("kazoo.client")
        client.warning("Connection dropped: socket connection error: %s", "Connection refused")
        client.warning("Session expired")
        assert capsys.readouterr().err == "kazoo: WARNING Session expired\n"
        kazoo.setLevel(logging.DEBUG)
        client.warning("Connection dropped: socket connection broken")
        assert capsys.readouterr().err == "kazoo: DEBUG Connection dropped: socket connection broken\n"
    finally:
        kazoo.handlers[:], kazoo.level, kazoo.propagate = saved
        logging.getLogger("kazoo.client").filters.clear()

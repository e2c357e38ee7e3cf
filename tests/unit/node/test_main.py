"""`kraft-node` as a process: starts, serves, logs in the node format, exits 0 on SIGTERM/SIGINT
and 2 on a configuration error."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from harness import free_port, wait_for

NODE = [sys.executable, "-c", "from kraft.main import main; main()"]


def wait_for_health(port: int, proc: subprocess.Popen, deadline_s: float = 60) -> dict:
    def health() -> dict:
        if proc.poll() is not None:  # pytest.fail is no Exception: wait_for stops at once
            pytest.fail(proc.stderr.read() if proc.stderr else "the node exited")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1) as r:
            return json.load(r)
    return wait_for(health, deadline_s, what="the node's /v1/health")


def serve_once(tmp_path: Path, *args: str, sig: signal.Signals = signal.SIGTERM) -> tuple[int, dict, str]:
    """A node on a free port with `args`, until it is healthy, then `sig`, which it must answer
    with exit code 0: its port, its health and its stderr."""
    port = free_port()
    proc = subprocess.Popen(NODE + ["--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"), *args],
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        health = wait_for_health(port, proc)
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return port, health, proc.stderr.read() if proc.stderr else ""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_starts_serves_and_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    port, health, stderr = serve_once(tmp_path, sig=sig)
    assert {k: health[k] for k in ("status", "node_id", "roles", "active_controller", "broker_state")} == {
        "status": "ok", "node_id": 1, "roles": ["broker", "controller"], "active_controller": True,
        "broker_state": "RUNNING"}
    assert f"INFO node=1 node: kraft node 1 serving on http://127.0.0.1:{port}" in stderr
    assert "node: stopped" in stderr
    assert "cluster.id=" in (tmp_path / "data" / "meta.properties").read_text()


def test_config_errors_exit_2_naming_the_key(tmp_path: Path) -> None:
    result = subprocess.run(NODE + ["--override", "num.partitions=zero"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "num.partitions" in result.stderr
    result = subprocess.run(NODE + ["--config", str(tmp_path / "nope.toml")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "cannot read" in result.stderr


def test_broker_id_names_the_node(tmp_path: Path) -> None:
    """Kafka's older name of node.id: `--override broker.id=2` starts node 2 (it started node 1)."""
    port = free_port()
    proc = subprocess.Popen(NODE + ["--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"),
                                    "--override", "broker.id=2"], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert wait_for_health(port, proc)["node_id"] == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "node.id=2" in (tmp_path / "data" / "meta.properties").read_text()
    result = subprocess.run(NODE + ["--node-id", "1", "--override", "broker.id=2"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "broker.id (2) and node.id (1) disagree" in result.stderr


def test_zookeeper_mode_without_kazoo_names_the_extra(tmp_path: Path) -> None:
    """kazoo is the zk extra's: without it ZooKeeper mode was a ModuleNotFoundError traceback."""
    without_kazoo = "import sys; sys.modules['kazoo'] = None; from kraft.main import main; main()"
    proc = subprocess.run([sys.executable, "-c", without_kazoo, "--zookeeper-connect", "127.0.0.1:2181/kraft",
                           "--override", "controller.quorum.secret=s", "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == ("kraft-node: configuration error: zookeeper.connect: ZooKeeper mode needs the kazoo "
                           "package, which kraft's zk extra installs: pip install 'kraft[zk]'\n")
    assert not (tmp_path / "data").exists()


def test_a_secret_file_open_to_other_users_is_warned_about(tmp_path: Path) -> None:
    """As ssh warns of a private key others can read (docs once wrote the file 0644 silently)."""
    secret = tmp_path / "cluster.secret"
    secret.write_text("a-long-random-cluster-secret\n")
    secret.chmod(0o644)
    _, _, stderr = serve_once(tmp_path, "--override", f"controller.quorum.secret.file={secret}")
    assert (f"WARNING node=1 controller.raft_quorum: secret file {secret} is accessible to other users "
            f"(mode 0644): chmod 600 {secret}") in stderr, stderr
    assert "a-long-random-cluster-secret" not in stderr

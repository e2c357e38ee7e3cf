"""A real ZooKeeper server for the tests (the Debian `zookeeper` package `scripts/test.sh`
installs), and kraft nodes in ZooKeeper mode.

`ZooKeeperServer` writes a `zoo.cfg` in a temp dir, starts `QuorumPeerMain` on a free port and
waits until a client connects; `stop()` kills it. A short tick lets tests use short session
timeouts (ZooKeeper bounds them to [2, 20] ticks).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from harness import NodeProcess, free_port, shutdown_all, wait_for

ZK_JARS = Path("/usr/share/java/zookeeper.jar")
ZK_CONF = Path("/etc/zookeeper/conf")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
SESSION_TIMEOUT_MS = 2000  # short: node loss is seen within seconds


def zookeeper_available() -> bool:
    return ZK_JARS.exists() and shutil.which("java") is not None


requires_zookeeper = pytest.mark.skipif(not zookeeper_available(),
                                        reason="needs the Debian zookeeper package and java (scripts/test.sh)")


class ZooKeeperServer:
    def __init__(self, root: Path, tick_ms: int = 100) -> None:
        self.root = root
        self.port = free_port()
        self.tick_ms = tick_ms
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "ZooKeeperServer":
        data = self.root / "zk-data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.root / "zoo.cfg"
        cfg.write_text(f"tickTime={self.tick_ms}\ndataDir={data}\nclientPort={self.port}\n"
                       "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                       "4lw.commands.whitelist=*\nmaxClientCnxns=0\n")
        log = open(self.root / "zookeeper.log", "ab")
        classpath = f"{ZK_CONF}:{ZK_JARS}"
        self.proc = subprocess.Popen(["java", "-Xmx256m", "-cp", classpath, MAIN, str(cfg)],
                                     stdout=log, stderr=subprocess.STDOUT, cwd=self.root)
        log.close()
        wait_for(self._answers, timeout, interval=0.2, what="ZooKeeper to accept clients")
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}")
        client = self.client()
        try:
            client.start(timeout=2)
            return True
        finally:
            client.stop()
            client.close()

    def client(self, chroot: str = "") -> KazooClient:
        return KazooClient(hosts=self.connect + chroot)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class ZkNode(NodeProcess):
    """A kraft node in ZooKeeper mode: no --role (every node is a broker that may become the
    controller)."""

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("--role")
        return cmd[:i] + cmd[i + 2:]


class ZkCluster:
    """`size` kraft nodes (ids 1..size) on one ZooKeeper chroot."""

    def __init__(self, root: Path, zookeeper: ZooKeeperServer, size: int = 3, chroot: str = "/kraft",
                 **overrides: Any) -> None:
        self.zookeeper = zookeeper
        self.chroot = chroot
        base = {"zookeeper.connect": zookeeper.connect + chroot,
                "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                "default.replication.factor": min(3, size), "offsets.topic.num.partitions": 3,
                **overrides}
        self.nodes = {i: ZkNode(node_id=i, data_dir=root / f"data-{i}", overrides=dict(base))
                      for i in range(1, size + 1)}

    def node(self, node_id: int) -> ZkNode:
        return self.nodes[node_id]

    def start(self, timeout: float = 60.0) -> "ZkCluster":
        for node in self.nodes.values():
            node.start(wait=False)
        for node in self.nodes.values():
            node.wait_healthy(timeout)
        self.wait_for_brokers(sorted(self.nodes), timeout)
        return self

    def stop(self) -> None:
        shutdown_all(list(self.nodes.values()))

    def metadata(self, node_id: int) -> dict[str, Any]:
        import requests

        response = requests.get(f"{self.nodes[node_id].url}/v1/metadata", timeout=5)
        response.raise_for_status()
        return response.json()

    def wait_for_brokers(self, broker_ids: list[int], timeout: float = 60.0,
                         on: list[int] | None = None) -> dict[int, dict[str, Any]]:
        """Every node of `on` (default: the running ones) sees exactly `broker_ids` live and one
        controller among them; answers the metadata by node."""
        def agreed() -> dict[int, dict[str, Any]] | None:
            answers = {i: self.metadata(i) for i in (on or [i for i, n in self.nodes.items() if n.running])}
            for answer in answers.values():
                if sorted(b["node_id"] for b in answer["brokers"]) != broker_ids:
                    return None
                if answer["controller_id"] not in broker_ids:
                    return None
            return answers
        return wait_for(agreed, timeout, what=f"brokers {broker_ids} seen by every node")

    def controller(self, timeout: float = 60.0, exclude: tuple[int, ...] = ()) -> int:
        """The node whose health says it is the active controller."""
        def active() -> int | None:
            found = [i for i, n in self.nodes.items()
                     if i not in exclude and n.running and n.health().get("active_controller")]
            return found[0] if len(found) == 1 else None
        return wait_for(active, timeout, what="one active controller")

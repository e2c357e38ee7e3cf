"""kraft nodes in ZooKeeper mode for the tests, on a `ZooKeeperEnsemble` (kraft/zk/ensemble.py:
the Debian `zookeeper` package `scripts/test.sh` installs, started on free ports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests

from harness import CLUSTER_SECRET, NodeProcess, shutdown_all, wait_for
from kraft.zk.ensemble import ZooKeeperEnsemble

SESSION_TIMEOUT_MS = 2000  # short: node loss is seen within seconds (the tick is 100 ms)


class ZkNode(NodeProcess):
    """A kraft node in ZooKeeper mode: no --role (every node is a broker that may become the
    controller)."""

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("--role")
        return cmd[:i] + cmd[i + 2:]


class ZkCluster:
    """`size` kraft nodes (ids 1..size) on one ZooKeeper chroot; the harness `Cluster`'s
    lifecycle and observation methods, so KRaft-mode scenarios run on it unchanged."""

    def __init__(self, root: Path, zookeeper: ZooKeeperEnsemble, size: int = 3, chroot: str = "/kraft",
                 **overrides: Any) -> None:
        self.zookeeper = zookeeper
        self.chroot = chroot
        base = {"zookeeper.connect": zookeeper.connect + chroot,
                "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                "controller.quorum.secret": CLUSTER_SECRET,  # the nodes' shared secret, in any mode
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

    def running(self) -> list[ZkNode]:
        return [n for n in self.nodes.values() if n.running]

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].kill()

    def pause(self, node_id: int) -> None:
        self.nodes[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].resume()

    def restart(self, node_id: int, wait: bool = True) -> NodeProcess:
        return self.nodes[node_id].restart(wait=wait)

    def metadata(self, node_id: int, topics: str | None = None) -> dict[str, Any]:
        params = {"topics": topics} if topics else None
        response = requests.get(f"{self.nodes[node_id].url}/v1/metadata", params=params, timeout=5)
        response.raise_for_status()
        return response.json()

    def wait_for_brokers(self, broker_ids: list[int], timeout: float = 60.0,
                         on: list[int] | None = None) -> dict[int, dict[str, Any]]:
        """Every node of `on` (default: the running ones) sees exactly `broker_ids` live and the
        same controller among them (a node that was paused keeps its old view until the
        controller pushes to it); answers the metadata by node."""
        def agreed() -> dict[int, dict[str, Any]] | None:
            answers = {i: self.metadata(i) for i in (on or [i for i, n in self.nodes.items() if n.running])}
            for answer in answers.values():
                if sorted(b["node_id"] for b in answer["brokers"]) != broker_ids:
                    return None
            controllers = {answer["controller_id"] for answer in answers.values()}
            return answers if len(controllers) == 1 and controllers <= set(broker_ids) else None
        return wait_for(agreed, timeout, what=f"brokers {broker_ids} seen by every node")

    def controller(self, timeout: float = 60.0, exclude: tuple[int, ...] = ()) -> int:
        """The node whose health says it is the active controller."""
        def active() -> int | None:
            found = [i for i, n in self.nodes.items()
                     if i not in exclude and n.running and n.health().get("active_controller")]
            return found[0] if len(found) == 1 else None
        return wait_for(active, timeout, what="one active controller")

"""A cluster rebuilt on the same addresses is a new cluster (issue 22 item 10): its first active
controller chooses a random cluster id, so a second cluster of three controllers and a broker
created on the first one's hosts and ports from empty directories gets another id (it was derived
from the voter set: the same); a controller started on the old cluster's data directory (refused by
the Raft leader's messages, which carry the cluster id) or a broker (refused by the controller)
does not join the new one, exits 1 with both ids in its log, and the new cluster is untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import Cluster, NodeProcess, wait_for

pytestmark = pytest.mark.cluster


def cluster_ids(cluster: Cluster) -> set[str]:
    return {h["cluster_id"] for h in cluster.healths().values()}


def meta_cluster_id(node: NodeProcess) -> str:
    props = dict(line.split("=", 1) for line in (node.data_dir / "meta.properties").read_text().splitlines()
                 if "=" in line)
    return props["cluster.id"]


def on_old_data(node: NodeProcess, old: NodeProcess) -> NodeProcess:
    """`node` (same id, ports and quorum) started on `old`'s data directory."""
    return NodeProcess(node_id=node.node_id, data_dir=old.data_dir, port=node.port,
                       controller_port=node.controller_port, roles=node.roles, quorum=node.quorum,
                       overrides=node.overrides)


def test_a_cluster_rebuilt_on_the_same_addresses_is_another_cluster(tmp_path: Path) -> None:
    old = Cluster(tmp_path / "old", 3, brokers=1)
    new = Cluster(tmp_path / "new", 3, brokers=1)
    for i, node in new.nodes.items():  # the same hosts and ports
        node.port, node.controller_port, node.quorum = old.nodes[i].port, old.nodes[i].controller_port, old.quorum
        node.overrides = dict(old.nodes[i].overrides)
    new.quorum = old.quorum
    strays: list[NodeProcess] = []
    try:
        old.start()
        (old_id,) = cluster_ids(old)
        assert all(meta_cluster_id(n) == old_id for n in old.nodes.values())
        old.stop()

        new.start()
        (new_id,) = cluster_ids(new)
        assert new_id != old_id and len(new_id) == 22
        assert all(meta_cluster_id(n) == new_id for n in new.nodes.values())
        new.create_topic("kept", 1, 1)

        for node_id in (2, 4):  # a controller, then the broker, each on its old data directory
            new.nodes[node_id].stop()
            stray = on_old_data(new.nodes[node_id], old.nodes[node_id])
            strays.append(stray)
            stray.start(wait=False)
            assert stray.proc.wait(timeout=120) == 1, stray.log_tail()
            refusals = [line for line in stray.log_path.read_text().splitlines() if f"node {node_id} stops:" in line]
            assert refusals and old_id in refusals[0] and new_id in refusals[0], stray.log_tail()
            assert meta_cluster_id(stray) == old_id  # its directory was not taken over either
            new.nodes[node_id].start()

        new.wait_ready()
        assert cluster_ids(new) == {new_id}
        assert [t["name"] for t in new.metadata(1)["topics"] if t["name"] == "kept"] == ["kept"]
        wait_for(lambda: [b["node_id"] for b in new.metadata(4)["brokers"]] == [4], 60,
                 what="the broker of the new cluster registered")
    finally:
        for stray in strays:
            if stray.running:
                stray.kill()
        new.stop()
        old.stop()

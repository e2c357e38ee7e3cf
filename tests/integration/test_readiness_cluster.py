"""Readiness of new nodes (issue 11, item 7): a script that waits for `?ready=true` on three new
nodes can create a replication factor 3 topic at once. Waiting on plain health (which answers as
soon as a node serves, before its broker is registered and unfenced) gave
INVALID_REPLICATION_FACTOR."""

from __future__ import annotations

import requests

from harness import Cluster, wait_for


def test_rf3_topic_right_after_three_new_nodes_are_ready(tmp_path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True) as cluster:
        nodes = list(cluster.nodes.values())
        for node in nodes:
            node.start(wait=False)
        # what the README's recipe does: `curl -fs .../v1/health?ready=true` per node, until 200
        for node in nodes:
            wait_for(node.ready, 60, what=f"node {node.node_id} ready")
        answer = requests.post(f"{nodes[0].url}/v1/topics", timeout=30, json={
            "name": "orders", "partitions": 6, "replication_factor": 3})
        assert answer.status_code == 201, answer.text
        health = nodes[0].health()
        assert health["ready"] is True and "reason" not in health

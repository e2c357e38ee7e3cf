"""`kraft-bench metadata`: metadata scale on a throwaway local cluster: partition creation rate,
propagation delay from commit to every broker, image size and memory."""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

import click
import requests

from kraft.bench.cluster import LocalCluster
from kraft.bench.common import BenchResult, Progress, main, report

def _wait_offsets(nodes: list[Any], offset: int, started: float, timeout_s: float = 30.0) -> list[float]:
    """Per node, the ms from `started` until its applied metadata offset reaches `offset`."""
    delays: list[float] = []
    sessions = {n.node_id: requests.Session() for n in nodes}
    pending = {n.node_id: n for n in nodes}
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for node_id, node in list(pending.items()):
            try:
                local = sessions[node_id].get(f"{node.url}/v1/controller/quorum/local", timeout=10).json()
            except requests.RequestException:
                continue  # a broker busy opening thousands of new partitions answers late
            if local["metadata_offset"] >= offset:
                delays.append((time.monotonic() - started) * 1000)
                del pending[node_id]
    if pending:
        raise click.ClickException(f"nodes {sorted(pending)} did not reach metadata offset {offset}")
    return delays


def _controller_post(http: requests.Session, cluster: LocalCluster, path: str, body: dict[str, Any],
                     timeout_s: float = 120.0) -> dict[str, Any]:
    """POST to the active controller's API, following NOT_CONTROLLER (an election under load) with
    the same request id, so a retry is applied once."""
    body = {**body, "request_id": uuid.uuid4().hex}
    deadline = time.monotonic() + timeout_s
    url = cluster.active_controller().url
    while True:
        r = http.post(f"{url}{path}", json=body, timeout=timeout_s)
        if r.status_code == 200:
            return r.json()
        answer = r.json()
        if not answer.get("retriable") or time.monotonic() > deadline:
            raise click.ClickException(f"{path}: {r.text}")
        leader = answer.get("leader")
        url = f"http://{leader['host']}:{leader['port']}" if leader else cluster.active_controller().url
        time.sleep(0.05)


@main.command()
@click.option("--partitions", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Partitions to create in total.")
@click.option("--partitions-per-topic", type=click.IntRange(min=1, max=10_000), default=1000, show_default=True)
@click.option("--brokers", type=click.IntRange(min=1), default=2, show_default=True, help="Broker-only nodes.")
@click.option("--samples", type=click.IntRange(min=1), default=100, show_default=True,
              help="Single-partition topics created afterwards to time propagation to every broker.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def metadata(partitions: int, partitions_per_topic: int, brokers: int, samples: int, json_path: str | None) -> None:
    """Metadata scale on a local 3-controller cluster with broker-only nodes: partition creation
    rate, propagation delay from commit to every broker (p50/p99), image size and memory."""
    with LocalCluster(3, brokers, combined=False) as cluster:
        controller = cluster.active_controller()
        http = requests.Session()
        rss_before = {n.node_id: n.rss_bytes() for n in cluster.running()}
        progress = Progress("metadata", sys.stderr)
        created, topic = 0, 0
        start = time.monotonic()
        while created < partitions:
            count = min(partitions_per_topic, partitions - created)
            answer = _controller_post(http, cluster, "/v1/controller/topics",
                                      {"name": f"scale-{topic}", "partitions": count, "replication_factor": 1})
            created, topic = created + count, topic + 1
            progress.update(created, 0)
        committed_s = time.monotonic() - start
        _wait_offsets(cluster.brokers(), answer["metadata_offset"], start, 300)
        elapsed = time.monotonic() - start  # until every broker applied them (and opened the logs)
        delays: list[float] = []
        for i in range(samples):
            answer = _controller_post(http, cluster, "/v1/controller/topics",
                                      {"name": f"probe-{i}", "partitions": 1, "replication_factor": 1})
            delays += _wait_offsets(cluster.brokers(), answer["metadata_offset"], time.monotonic())
        controller = cluster.active_controller()
        snapshot_bytes = len(http.get(f"{controller.url}/v1/controller/snapshot", timeout=120).content)
        growth_mb = {n.node_id: (n.rss_bytes() - rss_before[n.node_id]) / 2**20 for n in cluster.running()}
        broker_ids = [n.node_id for n in cluster.brokers()]
    delays.sort()
    params = {"partitions": partitions, "partitions_per_topic": partitions_per_topic, "brokers": brokers,
              "committed_partitions_per_sec": round(partitions / max(committed_s, 1e-9), 1),
              "propagation_samples": len(delays), "snapshot_bytes": snapshot_bytes,
              "controller_rss_growth_mb": round(growth_mb[controller.node_id], 1),
              "broker_rss_growth_mb": round(max(growth_mb[b] for b in broker_ids), 1)}
    report(BenchResult("metadata", params, partitions, 0, elapsed, delays), json_path)

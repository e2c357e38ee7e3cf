"""What `kraft-bench metadata` and `kraft-bench failover --partitions N` share: creating N
partitions on a local cluster through the active controller (with a rich progress bar), waiting
until every node applied them, and reading the nodes' own gauges (event-loop lag histogram, RSS)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Iterable

import click
import requests
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kraft.bench.cluster import LocalCluster, LocalNode, node_headers, poll

LOOP_LAG = "kraft_event_loop_lag_seconds"


def controllers(cluster: LocalCluster) -> list[LocalNode]:
    return [n for n in cluster.running() if "controller" in n.roles]


def active_controller(cluster: LocalCluster, timeout_s: float = 120.0) -> LocalNode:
    """The node whose own health says it is the active controller. Only controllers are asked:
    a broker busy applying metadata must not make the controller look absent."""
    def find() -> LocalNode | None:
        for node in controllers(cluster):
            try:
                if node.health().get("active_controller"):
                    return node
            except requests.RequestException:
                continue
        return None
    return poll(find, timeout_s, 0.02, "an active controller")


def controller_post(http: requests.Session, cluster: LocalCluster, path: str, body: dict[str, Any],
                    timeout_s: float = 120.0) -> dict[str, Any]:
    """POST to the active controller, following NOT_CONTROLLER and elections with the same
    request id (a retry is applied once)."""
    body = {**body, "request_id": uuid.uuid4().hex}
    deadline = time.monotonic() + timeout_s
    while True:
        node = active_controller(cluster, max(1.0, deadline - time.monotonic()))
        try:
            data = json.dumps(body).encode()
            r = http.post(f"{node.url}{path}", data=data, timeout=timeout_s, headers={
                "Content-Type": "application/json", **node_headers(node.node_id, "POST", path, data)})
        except requests.RequestException:
            r = None
        if r is not None and r.status_code == 200:
            return r.json()
        if r is not None and not r.json().get("retriable"):
            raise click.ClickException(f"{path}: {r.text}")
        if time.monotonic() > deadline:
            raise click.ClickException(f"{path}: no answer within {timeout_s:g} s")
        time.sleep(0.05)


def create_partitions(cluster: LocalCluster, partitions: int, per_topic: int, label: str,
                      prefix: str = "scale") -> tuple[int, float]:
    """Create `partitions` RF1 partitions in topics of `per_topic`; returns the metadata offset of
    the last one and the seconds it took, with a progress bar on stderr."""
    http = requests.Session()
    created, topic, offset = 0, 0, -1
    started = time.monotonic()
    columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("partitions, {task.fields[rate]:,.0f}/s"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(label, total=partitions, rate=0.0)
        while created < partitions:
            count = min(per_topic, partitions - created)
            answer = controller_post(http, cluster, "/v1/controller/topics",
                                     {"name": f"{prefix}-{topic}", "partitions": count,
                                      "replication_factor": 1})
            offset = int(answer["metadata_offset"])
            created, topic = created + count, topic + 1
            bar.update(task, completed=created, rate=created / max(time.monotonic() - started, 1e-9))
    return offset, time.monotonic() - started


def wait_offset(nodes: Iterable[LocalNode], offset: int, timeout_s: float = 600.0) -> dict[int, float]:
    """Per node, the seconds until its applied metadata offset (its /v1/health) reaches `offset`."""
    started = time.monotonic()
    sessions = {n.node_id: requests.Session() for n in nodes}
    pending = {n.node_id: n for n in nodes}
    reached: dict[int, float] = {}
    while pending:
        for node_id, node in list(pending.items()):
            try:
                health = sessions[node_id].get(f"{node.url}/v1/health", timeout=30).json()
            except (requests.RequestException, ValueError):
                continue
            if int(health.get("metadata_offset", -1)) >= offset:
                reached[node_id] = time.monotonic() - started
                del pending[node_id]
        if pending and time.monotonic() - started > timeout_s:
            raise click.ClickException(f"nodes {sorted(pending)} did not reach metadata offset {offset}")
    return reached


def quorum_epochs(cluster: LocalCluster) -> tuple[int, int]:
    """(highest controller epoch, highest Raft term) the running controllers report: their
    differences between two reads count the active-controller changes and the Raft elections
    in between (a term that elected nobody counts too)."""
    path = "/v1/controller/quorum/local"
    controller_epoch = raft_term = 0
    for node in controllers(cluster):
        try:
            status = requests.get(f"{node.url}{path}", timeout=30,
                                  headers=node_headers(node.node_id, "GET", path)).json()
        except (requests.RequestException, ValueError):
            continue
        controller_epoch = max(controller_epoch, int(status.get("controller_epoch") or 0))
        raft_term = max(raft_term, int((status.get("raft") or {}).get("leader_epoch") or 0))
    return controller_epoch, raft_term


def loop_lag_buckets(node: LocalNode) -> dict[float, float]:
    """The node's cumulative `kraft_event_loop_lag_seconds` buckets: upper bound -> count."""
    text = requests.get(f"{node.url}/metrics", timeout=120).text
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == LOOP_LAG:
            for sample in family.samples:
                if sample.name == LOOP_LAG + "_bucket":
                    buckets[float(sample.labels["le"])] = sample.value
    return buckets


def lag_p99_ms(before: dict[float, float], after: dict[float, float]) -> float | None:
    """p99 of the probes taken between two scrapes (the upper bound of its bucket), in ms."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    target = 0.99 * counts[-1]
    for bound, cumulative in zip(bounds, counts):
        if cumulative >= target:
            return bound * 1000
    return None

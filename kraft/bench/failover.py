"""`kraft-bench failover`: kill -9 the active controller (time to the first successful metadata
write) or a broker (time to the first successful produce to a partition it led) on a throwaway
local 3-node cluster (`kraft.bench.cluster`)."""

from __future__ import annotations

import json
import time
from typing import Any

import click
import requests

from kraft.bench.cluster import LocalCluster, node_headers, poll, port_range_option
from kraft.bench.common import BenchResult, main, percentile, report
from kraft.bench.histogram import LatencyHistogram
from kraft.bench.scale import create_partitions, wait_offset

def _write_topic(nodes: list[Any], name: str) -> bool:
    """One metadata write, the controller's way (a broker's partition budget must not refuse it
    when --partitions filled the cluster): whichever of `nodes` is the active controller takes it."""
    path = "/v1/controller/topics"
    body = json.dumps({"name": name, "partitions": 1, "replication_factor": 1}).encode()
    for node in nodes:
        try:
            r = requests.post(f"{node.url}{path}", data=body, timeout=2, headers={
                "Content-Type": "application/json", **node_headers(node.node_id, "POST", path, body)})
        except requests.RequestException:
            continue
        if r.status_code == 200 or r.json().get("error_code") == "TOPIC_ALREADY_EXISTS":
            return True
    return False


def _partition(node: Any, topic: str, partition: int) -> dict[str, Any]:
    topics = requests.get(f"{node.url}/v1/metadata", params={"topics": topic}, timeout=2).json()["topics"]
    return topics[0]["partitions"][partition]


def _produce_one(node: Any, topic: str, partition: int) -> bool:
    r = requests.post(f"{node.url}/v1/topics/{topic}/records", params={"acks": "1"},
                      json={"records": [{"value": "failover", "partition": partition}]}, timeout=2)
    return r.status_code == 200


def _controller_failover(cluster: LocalCluster, run: int) -> dict[str, float]:
    victim = cluster.active_controller()
    survivors = [n for n in cluster.running() if n is not victim]
    killed = time.monotonic()
    victim.kill()
    poll(lambda: _write_topic(survivors, f"failover-{run}"), 60, 0.005, "a metadata write")
    written = time.monotonic()
    victim.start()
    cluster.wait_ready()
    return {"failover_ms": (written - killed) * 1000}


def _broker_failover(cluster: LocalCluster, run: int) -> dict[str, float]:
    controller = cluster.active_controller()
    victim = next(n for n in cluster.brokers() if n is not controller)
    survivors = [n for n in cluster.running() if n is not victim]
    topic = f"broker-failover-{run}"
    assert requests.post(f"{controller.url}/v1/topics", json={"name": topic, "partitions": 6, "replication_factor": 2},
                         timeout=10).status_code == 201
    led = poll(lambda: [p for p in range(6) if _partition(controller, topic, p)["leader"] == victim.node_id],
               30, 0.05, "a partition led by the victim")[0]
    poll(lambda: len(_partition(controller, topic, led)["isr"]) == 2, 30, 0.05, "a full ISR")
    killed = time.monotonic()
    victim.kill()

    def new_leader() -> int | None:
        leader = _partition(survivors[0], topic, led)["leader"]
        return None if leader in (-1, victim.node_id) else leader
    leader = poll(new_leader, 120, 0.005, "a new leader")
    moved = time.monotonic()
    poll(lambda: _produce_one(cluster.nodes[leader], topic, led), 60, 0.005, "a produce to the moved partition")
    produced = time.monotonic()
    victim.start()
    cluster.wait_ready()
    return {"failover_ms": (produced - killed) * 1000, "leader_change_ms": (moved - killed) * 1000}


@main.command()
@port_range_option
@click.option("--target", type=click.Choice(["controller", "broker"]), required=True)
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--session-timeout-ms", type=click.IntRange(min=100), default=9000, show_default=True,
              help="broker.session.timeout.ms of the cluster (Kafka's default).")
@click.option("--partitions", type=click.IntRange(min=0), default=0, show_default=True,
              help="Partitions (RF 1) created before the first run, so failover is timed with a "
                   "metadata image of that size.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def failover(target: str, runs: int, session_timeout_ms: int, partitions: int, json_path: str | None) -> None:
    """Kill -9 the active controller (time to the first successful metadata write) or a broker
    (time to the first successful produce to a partition it led) on a local 3-node cluster,
    optionally holding N partitions."""
    overrides = {"broker.session.timeout.ms": session_timeout_ms,
                 "broker.heartbeat.interval.ms": max(50, min(2000, session_timeout_ms // 4))}
    measures: list[dict[str, float]] = []
    with LocalCluster(3, combined=True, overrides=overrides) as cluster:
        if partitions:
            cluster.wait_ready()
            offset, _ = create_partitions(cluster, partitions, 1000, "failover setup")
            wait_offset(cluster.running(), offset)
        start = time.monotonic()
        for run in range(runs):
            measures.append((_controller_failover if target == "controller" else _broker_failover)(cluster, run))
            click.echo(f"run {run + 1}/{runs}: " + ", ".join(f"{k} {v:.0f}" for k, v in measures[-1].items()),
                       err=True)
        elapsed = time.monotonic() - start
    failovers_s = sorted(m["failover_ms"] / 1000 for m in measures)
    params: dict[str, Any] = {"target": target, "runs": runs, "session_timeout_ms": session_timeout_ms,
                              "partitions": partitions,
                              "failover_p50_s": round(percentile(failovers_s, 50) or 0, 3),
                              "failover_p99_s": round(percentile(failovers_s, 99) or 0, 3)}
    if target == "broker":
        changes = sorted(m["leader_change_ms"] for m in measures)
        params["leader_change_p50_ms"] = round(percentile(changes, 50) or 0, 1)
    report(BenchResult(f"failover-{target}", params, runs, 0, elapsed,
                       LatencyHistogram.of_ms(m["failover_ms"] for m in measures)), json_path)

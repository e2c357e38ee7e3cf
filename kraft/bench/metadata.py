"""`kraft-bench metadata`: metadata at scale on a throwaway local cluster (3 controllers plus
broker-only nodes): how fast N partitions are created, how long until every broker applied them,
the propagation delay of one more topic to every broker, the worst event-loop lag while creating,
memory, and how long the controller's snapshot takes to load."""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

import click
import msgpack
import requests

from kraft.bench.cluster import LocalCluster, node_headers, port_range_option
from kraft.bench.common import BenchResult, main, percentile, report
from kraft.bench.histogram import LatencyHistogram
from kraft.bench.scale import (
    active_controller, controller_post, controllers, create_partitions, lag_p99_ms, loop_lag_buckets,
    quorum_epochs, wait_offset,
)
from kraft.controller.raft_state import PendingImage
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController, Endpoint, Partition, RegisterBroker, Topic


def snapshot_load_s(node: Any) -> tuple[float, int]:
    """Seconds to decode and build the controller's image snapshot (what a lagging broker or a
    restarted node does with it), and its size in bytes."""
    path = "/v1/controller/snapshot"
    r = requests.get(f"{node.url}{path}", timeout=600,
                     headers={"Accept": "application/msgpack", **node_headers(node.node_id, "GET", path)})
    r.raise_for_status()
    started = time.monotonic()
    if r.headers.get("Content-Type", "").startswith("application/msgpack"):
        data = msgpack.unpackb(r.content, raw=False, strict_map_key=False)
    else:
        data = r.json()
    MetadataImage.from_snapshot(data)
    return time.monotonic() - started, len(r.content)


@main.command()
@port_range_option
@click.option("--partitions", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Partitions to create in total (RF 1, spread over the brokers).")
@click.option("--partitions-per-topic", type=click.IntRange(min=1, max=10_000), default=1000, show_default=True)
@click.option("--brokers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Broker-only nodes (they hold the RF 1 replicas).")
@click.option("--samples", type=click.IntRange(min=1), default=50, show_default=True,
              help="Single-partition topics created afterwards to time propagation to every broker.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def metadata(partitions: int, partitions_per_topic: int, brokers: int, samples: int, json_path: str | None) -> None:
    """Metadata at scale on a local 3-controller cluster with broker-only nodes: partition
    creation rate, time until every broker applied them, propagation p50/p99 to every broker,
    worst event-loop lag while creating, RSS, snapshot load time."""
    with LocalCluster(3, brokers, combined=False) as cluster:
        active_controller(cluster)
        cluster.wait_ready(120)
        nodes = cluster.running()
        lag_before = {n.node_id: loop_lag_buckets(n) for n in nodes}
        epochs_before = quorum_epochs(cluster)
        last_offset, create_s = create_partitions(cluster, partitions, partitions_per_topic, "metadata")
        receivers = cluster.brokers() or controllers(cluster)
        reached = wait_offset(receivers, last_offset)
        visible_s = create_s + max(reached.values())
        lag_after = {n.node_id: loop_lag_buckets(n) for n in nodes}
        epochs_after = quorum_epochs(cluster)
        lags = {i: lag_p99_ms(lag_before[i], lag_after[i]) for i in lag_after}
        http = requests.Session()
        delays: list[float] = []
        for i in range(samples):
            answer = controller_post(http, cluster, "/v1/controller/topics",
                                     {"name": f"probe-{i}", "partitions": 1, "replication_factor": 1})
            # from the commit (the controller's answer) until the slowest receiver applied it
            arrived = wait_offset(receivers, int(answer["metadata_offset"]), 60)
            delays.append(max(arrived.values()) * 1000)
        load_s, snapshot_bytes = snapshot_load_s(active_controller(cluster))
        rss = {n.node_id: n.rss_bytes() / 2**20 for n in cluster.running()}
        controller_ids = {n.node_id for n in controllers(cluster)}
    delays.sort()
    summary: dict[str, Any] = {
        "partitions": partitions, "partitions_per_topic": partitions_per_topic, "brokers": brokers,
        "create_partitions_per_sec": round(partitions / max(create_s, 1e-9), 1),
        "visible_s": round(visible_s, 2),
        "propagation_p50_ms": round(percentile(delays, 50) or 0, 1),
        "propagation_p99_ms": round(percentile(delays, 99) or 0, 1),
        "event_loop_lag_p99_ms": max((v for v in lags.values() if v is not None), default=None),
        "event_loop_lag_p99_ms_by_node": lags,
        # while creating: active-controller changes and Raft elections (terms begun)
        "controller_changes": epochs_after[0] - epochs_before[0],
        "raft_elections": epochs_after[1] - epochs_before[1],
        "rss_mb_controller": round(max(v for k, v in rss.items() if k in controller_ids), 1),
        "rss_mb_broker": round(max((v for k, v in rss.items() if k not in controller_ids), default=0), 1),
        "snapshot_load_s": round(load_s, 3), "snapshot_bytes": snapshot_bytes,
    }
    report(BenchResult("metadata", summary, partitions, 0, visible_s, LatencyHistogram.of_ms(delays)), json_path)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@main.command("metadata-image")
@click.option("--partitions", type=click.IntRange(min=1), default=1_000_000, show_default=True)
@click.option("--partitions-per-topic", type=click.IntRange(min=1, max=10_000), default=1000, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def metadata_image(partitions: int, partitions_per_topic: int, json_path: str | None) -> None:
    """The metadata path alone, in this process (no cluster): replay N partition records as a
    controller commits them (one batch per topic, the one replay rule), then the image's memory,
    its snapshot size and how long a snapshot takes to load (msgpack, and the Raft dump's pickle)."""
    rss_before, cpu_before = _rss_mb(), time.process_time()
    brokers = [RegisterBroker(broker_id=b, incarnation_id=f"inc-{b}", broker_epoch=b,
                              endpoints=(Endpoint("HTTP", "127.0.0.1", 9000 + b),), controller_epoch=1)
               for b in (1, 2, 3)]
    delta, image = apply_records(MetadataImage.EMPTY, enumerate(
        [ClaimController(node_id=1, controller_epoch=1).to_dict()] + [b.to_dict() for b in brokers]))
    started = time.monotonic()
    created = topic = 0
    while created < partitions:
        count = min(partitions_per_topic, partitions - created)
        tid = f"id-{topic}"
        batch = [Topic(name=f"scale-{topic}", topic_id=tid, controller_epoch=1).to_dict()] + [
            Partition(topic_id=tid, partition=p, replicas=(1 + (created + p) % 3,),
                      isr=(1 + (created + p) % 3,), leader=1 + (created + p) % 3,
                      controller_epoch=1).to_dict() for p in range(count)]
        delta, image = apply_records(image, enumerate(batch, image.offset + 1))
        created, topic = created + count, topic + 1
    replay_s, replay_cpu_s = time.monotonic() - started, time.process_time() - cpu_before
    rss_image = _rss_mb() - rss_before
    started = time.monotonic()
    packed = msgpack.packb(image.to_snapshot(), use_bin_type=True)
    write_s = time.monotonic() - started
    started, cpu = time.monotonic(), time.process_time()
    loaded = MetadataImage.from_snapshot(msgpack.unpackb(packed, raw=False, strict_map_key=False))
    load_s, load_cpu_s = time.monotonic() - started, time.process_time() - cpu
    assert loaded == image
    # pysyncobj's dump format is pickle; both sides are this process's own bytes, never input
    dump = pickle.dumps(PendingImage(image))
    started, cpu = time.monotonic(), time.process_time()
    pickle.loads(dump).fold()
    dump_load_s, dump_load_cpu_s = time.monotonic() - started, time.process_time() - cpu
    summary = {"partitions": partitions, "replay_partitions_per_sec": round(partitions / replay_s, 1),
               "replay_partitions_per_cpu_sec": round(partitions / max(replay_cpu_s, 1e-9), 1),
               "rss_mb_image": round(rss_image, 1), "snapshot_bytes": len(packed),
               "snapshot_write_s": round(write_s, 3), "snapshot_load_s": round(load_s, 3),
               # CPU seconds too: on a shared machine the wall clock mostly measures the others
               "snapshot_load_cpu_s": round(load_cpu_s, 3), "raft_dump_load_s": round(dump_load_s, 3),
               "raft_dump_load_cpu_s": round(dump_load_cpu_s, 3)}
    report(BenchResult("metadata-image", summary, partitions, len(packed), replay_s), json_path)

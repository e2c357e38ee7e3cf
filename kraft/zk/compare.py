"""`kraft-bench compare-metadata`: KRaft and ZooKeeper mode side by side on this machine, with the
same brokers and load (3 nodes each: KRaft as 3 combined controller+broker nodes, ZooKeeper mode
as 3 brokers on a 3-server ZooKeeper ensemble started from the Debian package), each figure the
median over `--runs`:

- `controller_failover_s`: kill -9 of the active controller -> the new controller has acted on a
  topic creation, with `--partitions` partitions in the cluster;
- `controller_load_s`: the new controller reports itself active -> it has acted on that topic
  creation (a KRaft standby already holds the metadata; a ZooKeeper controller reads all of it
  first);
- `broker_failover_s`: kill -9 of a broker leading a partition -> the first acks=all produce
  acknowledged by the new leader;
- `propagation_p50_ms`, `propagation_p99_ms`: a topic creation sent -> the topic visible, led,
  on every broker;
- `create_partitions_s`: `--partitions` partitions (topics of at most 1000) written the way each
  design's tools write them (KRaft: the controller API; ZooKeeper: the topic znodes, as Kafka's
  AdminZkClient) -> every broker serves them all.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import click
import requests

from kraft.bench.cluster import NODE_COMMAND, LocalCluster, LocalNode, poll
from kraft.bench.common import main
from kraft.bench.failover import _partition
from kraft.bench.scale import controller_post as _controller_post
from kraft.zk import znodes
from kraft.zk.ensemble import ZooKeeperEnsemble, zookeeper_available
from metadata.placement import BrokerPlacement, place_replicas

KAFKA_ZK_SESSION_TIMEOUT_MS = 18_000
TOPIC_CHUNK = 1000
CHROOT = "/kraft"
KEYS = ("controller_failover_s", "controller_load_s", "broker_failover_s", "propagation_p50_ms",
        "propagation_p99_ms", "create_partitions_s")


class ZkLocalNode(LocalNode):
    """A LocalNode in ZooKeeper mode: no --role (every node is a broker and a candidate controller)."""

    def start(self) -> None:
        with open(self.data_dir.parent / f"node-{self.node_id}.log", "ab") as log:
            self.proc = subprocess.Popen(NODE_COMMAND + ["--node-id", str(self.node_id),
                                                         "--listen", f"127.0.0.1:{self.port}",
                                                         "--data-dir", str(self.data_dir), *self.args],
                                         stdout=log, stderr=subprocess.STDOUT)


class ZkLocalCluster:
    """3 ZooKeeper-mode nodes on a local ensemble of `zk_servers` servers; the cluster interface
    of `LocalCluster` the measurements use."""

    def __init__(self, nodes: int, zk_servers: int, session_timeout_ms: int) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kraft-bench-zk-"))
        # a server accepts session timeouts up to 20 ticks
        self.ensemble = ZooKeeperEnsemble(self.root, zk_servers, tick_ms=max(100, math.ceil(session_timeout_ms / 20)))
        self.nodes: dict[int, LocalNode] = {
            i: ZkLocalNode(i, "broker,controller", self.root / f"data-{i}",
                           ["--zookeeper-connect", self.ensemble.connect + CHROOT,
                            "--override", f"zookeeper.session.timeout.ms={session_timeout_ms}",
                            "--override", "controller.quorum.secret=kraft-bench"])  # shared, as LocalCluster's
            for i in range(1, nodes + 1)}

    def __enter__(self) -> "ZkLocalCluster":
        self.ensemble.start()
        for node in self.nodes.values():
            node.start()
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes.values():
            node.stop()
        self.ensemble.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def running(self) -> list[LocalNode]:
        return [n for n in self.nodes.values() if n.proc is not None and n.proc.poll() is None]

    def brokers(self) -> list[LocalNode]:
        return self.running()

    def active_controller(self, timeout_s: float = 60.0) -> LocalNode:
        def agreed() -> LocalNode | None:
            healths = {n.node_id: n.health() for n in self.running()}
            active = [i for i, h in healths.items() if h.get("active_controller")]
            if len(active) == 1 and all(h.get("controller_id") == active[0] for h in healths.values()):
                return self.nodes[active[0]]
            return None
        return poll(agreed, timeout_s, 0.05, "one active controller")

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """One controller, and every node registered and seen live by every node."""
        self.active_controller(timeout_s)
        ids = sorted(n.node_id for n in self.running())
        poll(lambda: all(sorted(b["node_id"] for b in requests.get(f"{n.url}/v1/metadata", timeout=5).json()["brokers"])
                         == ids for n in self.running()), timeout_s, 0.05, "every broker live everywhere")


# -- measurements (each takes a started cluster) ------------------------------------------------


def _visible(node: LocalNode, topics: set[str]) -> int:
    """How many partitions of `topics` `node` serves with a leader (asking for those topics only:
    rendering every topic of a big cluster in a tight loop would load the node measured)."""
    answer = requests.get(f"{node.url}/v1/metadata", timeout=30, params={
        "topics": ",".join(sorted(topics)), "allow_auto_topic_creation": "false"}).json()
    return sum(1 for t in answer["topics"] if t["name"] in topics for p in t["partitions"] if p["leader"] >= 0)


def propagation_ms(cluster: Any, samples: int) -> list[float]:
    delays = []
    nodes = cluster.running()
    for i in range(samples):
        name = f"probe-{uuid.uuid4().hex[:8]}"
        started = time.monotonic()
        assert requests.post(f"{nodes[i % len(nodes)].url}/v1/topics", timeout=60,
                             json={"name": name, "partitions": 1, "replication_factor": 1}).status_code == 201
        poll(lambda: all(_visible(n, {name}) == 1 for n in nodes), 60, 0.002, f"{name} on every broker")
        delays.append((time.monotonic() - started) * 1000)
    return delays


def controller_failover(cluster: Any, mode: str, run: int) -> tuple[float, float]:
    """(kill -9 -> the new controller has acted on a topic creation, reported active -> that),
    seconds. The topic is created the controller's way (KRaft: its API, committed; ZooKeeper: the
    topic znode, served once the controller wrote its partition state and pushed it), so a
    broker's partition budget does not refuse it in a cluster already holding `--partitions`."""
    victim = cluster.active_controller()
    survivors = [n for n in cluster.running() if n is not victim]
    killed = time.monotonic()
    victim.kill()
    poll(lambda: any(n.health().get("active_controller") for n in survivors), 300, 0.005, "a new controller")
    active = time.monotonic()
    name = f"failover-{run}-{uuid.uuid4().hex[:6]}"
    if mode == "kraft":
        _create_kraft(cluster, [(name, 1)])
    else:
        _create_zookeeper(cluster, [(name, 1)])
        poll(lambda: _visible(survivors[0], {name}) == 1, 300, 0.005, f"{name} served")
    acted = time.monotonic()
    victim.start()
    cluster.wait_ready(300)
    return acted - killed, acted - active


def broker_failover(cluster: Any, run: int) -> float:
    """kill -9 of a broker (not the controller) leading a partition of RF 2 -> the first acks=all
    produce acknowledged by the new leader, seconds."""
    controller = cluster.active_controller()
    victim = next(n for n in cluster.brokers() if n is not controller)
    survivor = next(n for n in cluster.running() if n is not victim)
    topic = f"broker-failover-{run}-{uuid.uuid4().hex[:6]}"
    assert requests.post(f"{controller.url}/v1/topics", timeout=60,
                         json={"name": topic, "partitions": 6, "replication_factor": 2}).status_code == 201
    led = poll(lambda: [p for p in range(6) if _partition(controller, topic, p)["leader"] == victim.node_id],
               30, 0.05, "a partition led by the victim")[0]
    poll(lambda: len(_partition(controller, topic, led)["isr"]) == 2, 30, 0.05, "a full ISR")
    killed = time.monotonic()
    victim.kill()

    def acknowledged() -> bool:
        leader = _partition(survivor, topic, led)["leader"]
        if leader in (-1, victim.node_id):
            return False
        r = requests.post(f"{cluster.nodes[leader].url}/v1/topics/{topic}/records", params={"acks": "all"},
                          json={"records": [{"value": "failover", "partition": led}]}, timeout=2)
        return r.status_code == 200
    poll(acknowledged, 120, 0.005, "an acks=all produce to the moved partition")
    produced = time.monotonic()
    victim.start()
    cluster.wait_ready(180)
    return produced - killed


def _create_kraft(cluster: LocalCluster, names: list[tuple[str, int]]) -> None:
    http = requests.Session()
    for name, count in names:
        _controller_post(http, cluster, "/v1/controller/topics",
                         {"name": name, "partitions": count, "replication_factor": 1})


def _create_zookeeper(cluster: Any, names: list[tuple[str, int]]) -> None:
    client = cluster.ensemble.client(CHROOT)
    client.start(timeout=30)
    try:
        brokers = [BrokerPlacement(int(b)) for b in client.get_children(znodes.BROKER_IDS)]
        rng = random.Random()
        for name, count in names:
            assignment = place_replicas(count, 1, brokers, start_index=rng.randrange(len(brokers)), replica_shift=0)
            client.create(znodes.topic_config_path(name), znodes.encode_config({}), makepath=True)
            client.create(znodes.topic_path(name), znodes.encode_topic(str(uuid.uuid4()), dict(enumerate(assignment))))
    finally:
        client.stop()
        client.close()


def create_partitions_s(cluster: Any, partitions: int, create: Callable[[list[tuple[str, int]]], None]) -> float:
    names = [(f"scale-{i}", min(TOPIC_CHUNK, partitions - i * TOPIC_CHUNK))
             for i in range(math.ceil(partitions / TOPIC_CHUNK))]
    started = time.monotonic()
    create(names)
    topics = {n for n, _ in names}
    poll(lambda: all(_visible(n, topics) == partitions for n in cluster.running()), 900, 0.5,
         f"{partitions} partitions served by every broker")
    return time.monotonic() - started


def measure(cluster: Any, mode: str, runs: int, partitions: int, samples: int) -> dict[str, Any]:
    def say(text: str) -> None:
        click.echo(f"[{mode}] {text}", err=True)

    delays = sorted(propagation_ms(cluster, samples))
    say(f"propagation p50 {statistics.median(delays):.1f} ms over {samples} topics")
    broker = []
    for run in range(runs):
        broker.append(broker_failover(cluster, run))
        say(f"broker failover {run + 1}/{runs}: {broker[-1]:.2f} s")
    create = _create_kraft if mode == "kraft" else _create_zookeeper
    created = create_partitions_s(cluster, partitions, lambda names: create(cluster, names))  # type: ignore[arg-type]
    say(f"{partitions} partitions served by every broker in {created:.1f} s")
    failovers, loads = [], []
    for run in range(runs):
        failover, load = controller_failover(cluster, mode, run)
        failovers.append(failover)
        loads.append(load)
        say(f"controller failover {run + 1}/{runs}: {failover:.2f} s (ready to act {load:.3f} s after election)")
    return {
        "controller_failover_s": round(statistics.median(failovers), 3),
        "controller_load_s": round(statistics.median(loads), 3),
        "broker_failover_s": round(statistics.median(broker), 3),
        "propagation_p50_ms": round(delays[(len(delays) - 1) // 2], 1),
        "propagation_p99_ms": round(delays[min(len(delays) - 1, math.ceil(len(delays) * 0.99) - 1)], 1),
        "create_partitions_s": round(created, 2),
    }


@main.command("compare-metadata")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Failovers per figure (median).")
@click.option("--partitions", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Partitions in the cluster for create_partitions_s and the controller failovers.")
@click.option("--samples", type=click.IntRange(min=1), default=20, show_default=True,
              help="Topic creations timed for propagation.")
@click.option("--zk-session-timeout-ms", type=click.IntRange(min=200), default=KAFKA_ZK_SESSION_TIMEOUT_MS,
              show_default=True, help="zookeeper.session.timeout.ms (Kafka's default 18000).")
@click.option("--zk-servers", type=click.IntRange(min=1), default=3, show_default=True, help="ZooKeeper ensemble size.")
@click.option("--mode", "modes", type=click.Choice(["kraft", "zookeeper"]), multiple=True,
              help="Measure only this mode (repeatable; default both).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True),
              help='Write {"kraft": {...}, "zookeeper": {...}} here.')
def compare_metadata(runs: int, partitions: int, samples: int, zk_session_timeout_ms: int, zk_servers: int,
                     modes: tuple[str, ...], json_path: str | None) -> None:
    """KRaft vs ZooKeeper mode on local 3-broker clusters: controller and broker failover,
    controller load, metadata propagation and partition creation."""
    if "zookeeper" in (modes or ("zookeeper",)) and not zookeeper_available():
        raise click.ClickException("ZooKeeper mode needs the Debian zookeeper package and java")
    results: dict[str, dict[str, Any]] = {}
    for mode in modes or ("kraft", "zookeeper"):
        if mode == "kraft":
            cluster: Any = LocalCluster(3, combined=True)
            setting = {"broker_session_timeout_ms": 9000}
        else:
            cluster = ZkLocalCluster(3, zk_servers, zk_session_timeout_ms)
            setting = {"zookeeper_session_timeout_ms": zk_session_timeout_ms, "zookeeper_servers": zk_servers}
        with _started(cluster):
            results[mode] = {**measure(cluster, mode, runs, partitions, samples), **setting,
                             "partitions": partitions, "runs": runs}
    _print(results)
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def _started(cluster: Any) -> Iterator[Any]:
    """The cluster started, and stopped afterwards even when it never became ready."""
    try:
        cluster.__enter__()
    except BaseException:
        cluster.__exit__(None, None, None)
        raise
    try:
        yield cluster
    finally:
        cluster.__exit__(None, None, None)


def _print(results: dict[str, dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    modes = list(results)
    table = Table("metric", *modes, title="kraft-bench compare-metadata", title_justify="left")
    for key in (*KEYS, "broker_session_timeout_ms", "zookeeper_session_timeout_ms", "zookeeper_servers",
                "partitions", "runs"):
        if any(key in r for r in results.values()):
            table.add_row(key, *("-" if key not in results[m] else str(results[m][key]) for m in modes))
    Console(file=click.get_text_stream("stdout"), soft_wrap=True).print(table)

"""`kraft-bench compare-metadata`: KRaft and ZooKeeper mode side by side on this machine, with the
same brokers and load (3 nodes each: KRaft as 3 combined controller+broker nodes, ZooKeeper mode
as 3 brokers on a 3-server ZooKeeper ensemble started from the Debian package), each figure the
median over `--runs`, with the issue's definitions:

- `controller_failover_s`: kill -9 of the active controller -> the first successful topic
  creation, asked for from the moment of the kill and made the controller's way (see
  `controller_failover`), with `--partitions` partitions in the cluster;
- `controller_load_s`: the new controller reports itself active -> that creation succeeded (a
  KRaft standby already holds the metadata; a ZooKeeper controller reads all of it first);
- `broker_failover_s`: kill -9 of a broker leading a partition -> the first acks=all produce
  acknowledged by the new leader;
- `propagation_p50_ms`, `propagation_p99_ms`: a topic creation committed (KRaft: the active
  controller's answer, sent once the record is committed; ZooKeeper: the topic znode written, as
  Kafka's AdminZkClient writes it) -> the topic visible, led, on every broker;
- `create_partitions_s`: `--partitions` partitions (topics of at most 1000) written the way each
  design's tools write them (KRaft: the controller API; ZooKeeper: the topic znodes, as Kafka's
  AdminZkClient) -> every broker serves them all.

`--partitions-sweep 1000,10000,100000` grows one cluster per mode through those counts and takes
the controller figures at each (`"sweep"` in the JSON; the top-level figures are those of the
largest count, `create_partitions_s` then timing the step from the previous count); `--plot
FILE.png` draws controller failover and load against the partition count (matplotlib, the
`bench` extra), and `--from-json FILE` redraws the table and plot of an earlier run.
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
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import click
import requests

from kraft.bench.cluster import NODE_COMMAND, LocalCluster, LocalNode, poll, port_range_option
from kraft.bench.common import main
from kraft.bench.failover import _partition
from kraft.bench.scale import controller_post as _controller_post
from kraft.zk import znodes
from kraft.zk.ensemble import ZooKeeperEnsemble, route_kazoo_logging, tick_ms_for, zookeeper_available
from kraft.metadata.placement import BrokerPlacement, place_replicas

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
        self.ensemble = ZooKeeperEnsemble(self.root, zk_servers, tick_ms=tick_ms_for(session_timeout_ms))
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


def propagation_ms(cluster: Any, mode: str, samples: int) -> list[float]:
    """Topic creations, each timed from its commit (KRaft: the active controller answers once the
    record is committed; ZooKeeper: the topic znode is written, as Kafka's AdminZkClient writes
    it) to the topic visible, led, on every broker."""
    delays = []
    nodes = cluster.running()
    create = _create_kraft if mode == "kraft" else _create_zookeeper
    for _ in range(samples):
        name = f"probe-{uuid.uuid4().hex[:8]}"
        create(cluster, [(name, 1)])
        committed = time.monotonic()
        poll(lambda: all(_visible(n, {name}) == 1 for n in nodes), 60, 0.002, f"{name} on every broker")
        delays.append((time.monotonic() - committed) * 1000)
    return delays


def controller_failover(cluster: Any, mode: str, label: str) -> tuple[float, float]:
    """(kill -9 of the active controller -> the first successful topic creation, asked for from
    the moment of the kill; the first survivor reporting itself active -> that success), seconds.

    The topic is created the controller's way, as a broker's create request does it (KRaft: the
    controller API, retried through NOT_CONTROLLER and elections, successful once committed;
    ZooKeeper: the topic znode, as Kafka's AdminZkClient writes it, successful once a survivor
    serves it with a leader, when Kafka's controller would answer CreateTopics): a broker's own
    `POST /v1/topics` checks its partition budget against every partition of the cluster, so it
    refuses creations in a cluster holding more than about 4 000 at a 20 000 open-files limit."""
    victim = cluster.active_controller()
    survivors = [n for n in cluster.running() if n is not victim]
    stop = threading.Event()
    became_active: list[float] = []

    def watch() -> None:  # when a survivor first says it is the active controller
        while not stop.is_set():
            try:
                if any(n.health().get("active_controller") for n in survivors):
                    became_active.append(time.monotonic())
                    return
            except requests.RequestException:
                pass
            time.sleep(0.005)

    name = f"failover-{label}-{uuid.uuid4().hex[:6]}"
    watcher = threading.Thread(target=watch, daemon=True)
    killed = time.monotonic()
    victim.kill()
    watcher.start()
    try:
        if mode == "kraft":
            _create_kraft(cluster, [(name, 1)])
        else:  # on a survivor: the dead broker's znode lives until its session expires
            _create_zookeeper(cluster, [(name, 1)], replicas=[survivors[0].node_id])
            poll(lambda: _visible(survivors[0], {name}) == 1, 900, 0.005, f"{name} served")
        created = time.monotonic()
        watcher.join(60)  # the creation succeeded: a controller is active, the watcher sees it next
    finally:
        stop.set()
    if not became_active:
        raise click.ClickException("a topic creation succeeded, but no survivor reported itself the active controller")
    victim.start()
    cluster.wait_ready(900)
    return created - killed, max(0.0, created - became_active[0])


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


def _create_zookeeper(cluster: Any, names: list[tuple[str, int]], replicas: list[int] | None = None) -> None:
    """RF 1 topics written as Kafka's AdminZkClient writes them, placed over `replicas` (default:
    the registered brokers)."""
    client = cluster.ensemble.client(CHROOT)
    client.start(timeout=30)
    try:
        brokers = [BrokerPlacement(int(b)) for b in (replicas or client.get_children(znodes.BROKER_IDS))]
        rng = random.Random()
        for name, count in names:
            assignment = place_replicas(count, 1, brokers, start_index=rng.randrange(len(brokers)), replica_shift=0)
            client.create(znodes.topic_config_path(name), znodes.encode_config({}), makepath=True)
            client.create(znodes.topic_path(name), znodes.encode_topic(str(uuid.uuid4()), dict(enumerate(assignment))))
    finally:
        client.stop()
        client.close()


def create_partitions_s(cluster: Any, have: int, partitions: int,
                        create: Callable[[list[tuple[str, int]]], None]) -> float:
    """Adds partitions `have`..`partitions` (topics of at most TOPIC_CHUNK) -> every broker
    serves them all, seconds."""
    names = [(f"scale-{start}", min(TOPIC_CHUNK, partitions - start)) for start in range(have, partitions, TOPIC_CHUNK)]
    started = time.monotonic()
    create(names)
    topics = {n for n, _ in names}
    poll(lambda: all(_visible(n, topics) == partitions - have for n in cluster.running()), 3600, 0.5,
         f"{partitions - have} partitions served by every broker")
    return time.monotonic() - started


def measure(cluster: Any, mode: str, runs: int, counts: list[int], samples: int, swept: bool = False) -> dict[str, Any]:
    """The figures on a started cluster. `counts` (ascending): the cluster grows to each, and the
    controller figures are taken there; the top-level ones are those of the last, and `swept`
    keeps every count's as `"sweep"`."""
    def say(text: str) -> None:
        click.echo(f"[{mode}] {text}", err=True)

    delays = sorted(propagation_ms(cluster, mode, samples))
    say(f"propagation p50 {statistics.median(delays):.1f} ms over {samples} topics")
    broker = []
    for run in range(runs):
        broker.append(broker_failover(cluster, run))
        say(f"broker failover {run + 1}/{runs}: {broker[-1]:.2f} s")
    create = _create_kraft if mode == "kraft" else _create_zookeeper
    points: list[dict[str, Any]] = []
    have = 0
    for count in counts:
        created = create_partitions_s(cluster, have, count, lambda names: create(cluster, names))  # type: ignore[arg-type]
        say(f"{count - have} partitions added ({count} in the cluster) and served by every broker in {created:.1f} s")
        failovers, loads = [], []
        for run in range(runs):
            failover, load = controller_failover(cluster, mode, f"{count}-{run}")
            failovers.append(failover)
            loads.append(load)
            say(f"controller failover {run + 1}/{runs} with {count} partitions: {failover:.2f} s "
                f"(created {load:.3f} s after a new controller said it was active)")
        points.append({"partitions": count, "create_partitions_from": have, "create_partitions_s": round(created, 2),
                       "controller_failover_s": round(statistics.median(failovers), 3),
                       "controller_load_s": round(statistics.median(loads), 3)})
        have = count
    last = points[-1]
    figures: dict[str, Any] = {
        "controller_failover_s": last["controller_failover_s"],
        "controller_load_s": last["controller_load_s"],
        "broker_failover_s": round(statistics.median(broker), 3),
        "propagation_p50_ms": round(delays[(len(delays) - 1) // 2], 1),
        "propagation_p99_ms": round(delays[min(len(delays) - 1, math.ceil(len(delays) * 0.99) - 1)], 1),
        "create_partitions_s": last["create_partitions_s"],
    }
    if last["create_partitions_from"]:
        figures["create_partitions_from"] = last["create_partitions_from"]
    if swept:
        figures["sweep"] = points
    return figures


def _sweep(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        counts = sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError:
        raise click.BadParameter(f"expected partition counts separated by commas, got {value!r}") from None
    if not counts or counts[0] < 1:
        raise click.BadParameter(f"expected positive partition counts, got {value!r}")
    return counts


@main.command("compare-metadata")
@port_range_option
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Failovers per figure (median).")
@click.option("--partitions", type=click.IntRange(min=1), default=None,
              help="Partitions in the cluster for create_partitions_s and the controller failovers [default: 10000].")
@click.option("--partitions-sweep", "sweep", callback=_sweep, metavar="N,N,...",
              help="Grow each cluster through these partition counts (e.g. 1000,10000,100000) and take the "
                   "controller figures at each (instead of --partitions).")
@click.option("--samples", type=click.IntRange(min=1), default=20, show_default=True,
              help="Topic creations timed for propagation.")
@click.option("--zk-session-timeout-ms", type=click.IntRange(min=200), default=KAFKA_ZK_SESSION_TIMEOUT_MS,
              show_default=True, help="zookeeper.session.timeout.ms (Kafka's default 18000).")
@click.option("--zk-servers", type=click.IntRange(min=1), default=3, show_default=True, help="ZooKeeper ensemble size.")
@click.option("--mode", "modes", type=click.Choice(["kraft", "zookeeper"]), multiple=True,
              help="Measure only this mode (repeatable; default both).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True),
              help='Write {"kraft": {...}, "zookeeper": {...}} here.')
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True),
              help="Draw controller failover and load time against the partition count (needs "
                   "--partitions-sweep, and matplotlib: pip install 'kraft[bench]') as this PNG.")
@click.option("--from-json", "from_json", type=click.Path(dir_okay=False, exists=True), multiple=True,
              help="Measure nothing: print the table (and --plot) of an earlier run's --json file "
                   "(repeatable: the sweeps are merged, a later file's figures win).")
def compare_metadata(runs: int, partitions: int | None, sweep: list[int] | None, samples: int,
                     zk_session_timeout_ms: int, zk_servers: int, modes: tuple[str, ...], json_path: str | None,
                     plot_path: str | None, from_json: tuple[str, ...]) -> None:
    """KRaft vs ZooKeeper mode on local 3-broker clusters: controller and broker failover,
    controller load, metadata propagation and partition creation."""
    if plot_path:
        _pyplot()  # fail now, not after an hour of measuring
    if from_json:
        results = merge_results([json.loads(Path(f).read_text()) for f in from_json])
        _print(results)
        if plot_path:
            plot_sweep(results, plot_path)
        return
    if sweep and partitions is not None:
        raise click.UsageError("give --partitions or --partitions-sweep, not both")
    if plot_path and not sweep:
        raise click.UsageError("--plot draws figures against the partition count: give --partitions-sweep")
    counts = sweep or [partitions or 10_000]
    if "zookeeper" in (modes or ("zookeeper",)) and not zookeeper_available():
        raise click.ClickException("ZooKeeper mode needs the Debian zookeeper package and java")
    route_kazoo_logging()
    results: dict[str, dict[str, Any]] = {}
    for mode in modes or ("kraft", "zookeeper"):
        if mode == "kraft":
            cluster: Any = LocalCluster(3, combined=True)
            setting = {"broker_session_timeout_ms": 9000}
        else:
            cluster = ZkLocalCluster(3, zk_servers, zk_session_timeout_ms)
            setting = {"zookeeper_session_timeout_ms": zk_session_timeout_ms, "zookeeper_servers": zk_servers}
        with _started(cluster):
            results[mode] = {**measure(cluster, mode, runs, counts, samples, swept=bool(sweep)), **setting,
                             "partitions": counts[-1], "runs": runs}
        if json_path:  # after each mode: a long run keeps what it measured
            Path(json_path).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    _print(results)
    if plot_path:
        plot_sweep(results, plot_path)


def merge_results(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Several runs' JSON as one: per mode a later run's figures win, and the sweeps' points are
    merged by partition count (a later run's win)."""
    merged: dict[str, dict[str, Any]] = {}
    for run in runs:
        for mode, figures in run.items():
            points = {p["partitions"]: p for p in merged.get(mode, {}).get("sweep", [])}
            points.update({p["partitions"]: p for p in figures.get("sweep", [])})
            merged[mode] = {**merged.get(mode, {}), **figures}
            if points:
                merged[mode]["sweep"] = [points[c] for c in sorted(points)]
    return merged


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install 'kraft[bench]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


MODE_STYLE = {"kraft": ("KRaft", "tab:blue", "o"), "zookeeper": ("ZooKeeper mode", "tab:red", "s")}


def plot_sweep(results: dict[str, dict[str, Any]], path: str) -> None:
    """Controller failover and controller load (seconds) against the partition count, one line
    per mode, both axes logarithmic (KRaft's figures are a hundredth of ZooKeeper mode's)."""
    swept = {m: r["sweep"] for m, r in results.items() if r.get("sweep")}
    if not swept:
        raise click.ClickException("nothing to plot: the results have no --partitions-sweep figures")
    plt = _pyplot()
    from matplotlib import ticker

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    for ax, key, title in ((axes[0], "controller_failover_s", "Controller failover\n(kill -9 -> first topic created)"),
                           (axes[1], "controller_load_s", "Controller load\n(new controller active -> topic created)")):
        for mode, points in swept.items():
            label, color, marker = MODE_STYLE.get(mode, (mode, None, "o"))
            xs = [p["partitions"] for p in points]
            ys = [max(p[key], 0.001) for p in points]  # a log axis has no 0
            ax.plot(xs, ys, marker=marker, color=color, label=label)
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.2f}" if y < 10 else f"{y:.1f}", (x, y), textcoords="offset points",
                            xytext=(0, 7), ha="center", fontsize=8, color=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
        counts = sorted({p["partitions"] for points in swept.values() for p in points})
        ax.set_xticks(counts, [f"{c:,}" for c in counts])
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        low, high = ax.get_ylim()
        ax.set_ylim(low / 1.5, high * 2)  # room for the labels
        ax.set_xlim(counts[0] / 1.6, counts[-1] * 1.6)
        ax.set_xlabel("partitions in the cluster")
        ax.set_ylabel("seconds (median)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    settings = []
    if "zookeeper" in results and "zookeeper_session_timeout_ms" in results["zookeeper"]:
        settings.append(f"zookeeper.session.timeout.ms {results['zookeeper']['zookeeper_session_timeout_ms']}")
    if "kraft" in results and "broker_session_timeout_ms" in results["kraft"]:
        settings.append(f"KRaft broker.session.timeout.ms {results['kraft']['broker_session_timeout_ms']}")
    runs = sorted({r.get("runs") for r in results.values() if r.get("runs")})
    fig.suptitle("kraft-bench compare-metadata: 3 brokers, RF 1, " + ", ".join(settings)
                 + (f"; median of {'/'.join(map(str, runs))} runs" if runs else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    click.echo(f"plot written to {path}", err=True)


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

    stdout = click.get_text_stream("stdout")
    console = Console(file=stdout, soft_wrap=True, width=None if stdout.isatty() else 120)  # a file: no cut
    modes = list(results)
    table = Table("metric", *modes, title="kraft-bench compare-metadata", title_justify="left")
    for key in (*KEYS, "create_partitions_from", "broker_session_timeout_ms", "zookeeper_session_timeout_ms",
                "zookeeper_servers", "partitions", "runs"):
        if any(key in r for r in results.values()):
            table.add_row(key, *("-" if key not in results[m] else str(results[m][key]) for m in modes))
    console.print(table)
    swept = [m for m in modes if results[m].get("sweep")]
    if swept:
        sweep = Table("partitions", *(f"{k} {m}" for k in ("failover_s", "load_s", "create_s") for m in swept),
                      title="partition sweep: controller_failover_s, controller_load_s, create_partitions_s "
                            "(from the previous count)", title_justify="left")
        by_count: dict[int, dict[str, dict[str, Any]]] = {}
        for m in swept:
            for point in results[m]["sweep"]:
                by_count.setdefault(point["partitions"], {})[m] = point
        for count, points in sorted(by_count.items()):
            sweep.add_row(str(count), *(str(points[m][k]) if m in points else "-"
                                        for k in ("controller_failover_s", "controller_load_s", "create_partitions_s")
                                        for m in swept))
        console.print(sweep)

"""One timed chaos run: a local cluster (KRaft, or ZooKeeper mode on a local ZooKeeper server the
run starts: `ChaosOptions.mode`) behind link proxies (and on size-limited disks when
disk-full is asked for, or with ENOSPC injected at the file layer where none can be mounted), the workload, the seeded fault schedule, then the final state and the
checker's findings. `kraft-bench chaos --duration` is a thin command around `run_chaos`.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import requests

from kraft.api.client import Admin
from kraft.bench.chaos.checker import Findings, check
from kraft.bench.chaos.clients import read_partition
from kraft.bench.chaos.faults import DiskFull, Injector, log_dir_failure, prepare_disk_full
from kraft.bench.chaos.proxy import LinkProxies
from kraft.bench.chaos.fencings import fencings_logged
from kraft.bench.chaos.schedule import FaultEvent, cooldown_s, make_schedule
from kraft.bench.chaos.transactional import ReadCommittedWorker, TransactionalProducerWorker
from kraft.bench.chaos.workload import (GroupConsumerWorker, History, LeaderMonitor, MetadataWorker, ProducerWorker,
                                        load_history)
from kraft.bench.cluster import LocalCluster, poll
from kraft.zk.ensemble import ZooKeeperEnsemble, tick_ms_for
from kraft.log.fault_injection import ENV as FSYNC_DELAY_ENV

IDEMPOTENT_TOPIC, PLAIN_TOPIC, GROW_TOPIC, GROUP = "chaos-idem", "chaos-plain", "chaos-grow", "chaos-group"
TOPICS = {IDEMPOTENT_TOPIC: 3, PLAIN_TOPIC: 2}  # produced topics and their partition counts
TXN_TOPIC, TXN_PARTITIONS = "chaos-txn", 3  # the transactional workload's topic
WORKLOADS = ("standard", "transactional")
MIN_INSYNC_REPLICAS = 2
DISK_FAULTS = ("disk-full", "controller-disk-full")
MODES = ("kraft", "zookeeper")
ZK_CHROOT = "/kraft-chaos"


@dataclass
class ChaosOptions:
    duration_s: float
    faults: list[str]
    seed: int
    history_path: str
    nodes: int = 3
    session_timeout_ms: int = 3000
    disk_mb: int = 256
    recover_timeout_s: float = 120.0
    mode: str = "kraft"  # or "zookeeper": the brokers in ZooKeeper mode (the ZooKeeper server is no fault target)
    workload: str = "standard"  # or "transactional": the standard one plus transactions (`transactional`)
    extra_overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChaosOutcome:
    findings: Findings
    schedule: list[FaultEvent]
    skipped: dict[str, str]  # fault -> why it was not injected
    history_path: str
    late: int  # repeats of fault types left out because the run's time was up
    disk_full_method: str | None = None  # faults.TMPFS or faults.FILE_LAYER, when disk-full was asked for


def _overrides(options: ChaosOptions) -> dict[str, Any]:
    session = options.session_timeout_ms
    out: dict[str, Any] = {
        "broker.session.timeout.ms": session, "broker.heartbeat.interval.ms": max(50, min(2000, session // 6)),
        "min.insync.replicas": MIN_INSYNC_REPLICAS, "replica.lag.time.max.ms": session,
        "replica.fetch.wait.max.ms": 200,
        "log.segment.bytes": 64 * 1024,  # closed segments within a minute or two, for flip-closed
    }
    if options.mode == "zookeeper":  # the broker session is the ZooKeeper session
        out["zookeeper.session.timeout.ms"] = session
    if "slow-disk" in options.faults:
        out["log.flush.interval.ms"] = 2000  # segment fsyncs happen, so a slow one matters
    out.update(options.extra_overrides)
    return out


def produced_topics(workload: str) -> dict[str, int]:
    """The topics the workload produces to, and their partition counts."""
    return {**TOPICS, TXN_TOPIC: TXN_PARTITIONS} if workload == "transactional" else dict(TOPICS)


def _partition_isrs(node_url: str, topics: Iterable[str]) -> dict[tuple[str, int], tuple[int, list[int]]]:
    meta = requests.get(f"{node_url}/v1/metadata", params={"topics": ",".join(topics)}, timeout=3).json()
    return {(t["name"], p["partition"]): (p["leader"], p["isr"]) for t in meta["topics"] for p in t["partitions"]}


def recovered(cluster: LocalCluster, topics: dict[str, int]) -> bool:
    """Every node healthy and running, every produced partition led with a full ISR, as each node sees it."""
    size = len(cluster.nodes)
    for node in cluster.nodes.values():
        if node.proc is None or node.proc.poll() is not None:
            return False
        if node.health().get("broker_state", "RUNNING") != "RUNNING":
            return False
        state = _partition_isrs(node.url, topics)
        if len(state) != sum(topics.values()) or any(leader < 0 or len(isr) != size for leader, isr in state.values()):
            return False
    return True


def _read_to_end(cluster: LocalCluster, topic: str, p: int, timeout_s: float,
                 committed: bool) -> tuple[int, int, list[list[Any]], list[list[int]]]:
    """The partition's leader, its end (the high watermark; read_committed: the last stable offset
    once it reached the high watermark, every transaction ended), its records below it, and the
    ranges the leader answers CORRUPT_MESSAGE for (quarantined, stepped over by the read)."""
    def end() -> tuple[int, int] | None:
        leader, _ = _partition_isrs(cluster.nodes[1].url, [topic])[(topic, p)]
        offsets = requests.get(f"{cluster.nodes[leader].url}/v1/topics/{topic}/partitions/{p}/offsets",
                               timeout=5).json()
        if committed and offsets["last_stable_offset"] != offsets["high_watermark"]:
            return None
        return leader, offsets["high_watermark"]
    what = f"the {'last stable offset' if committed else 'high watermark'} of {topic}-{p}"
    leader, until = poll(end, timeout_s, 0.2, what)
    quarantined: list[tuple[int, int]] = []
    records = read_partition(cluster.bootstrap, topic, p, until, timeout_s, quarantined,
                             "read_committed" if committed else "read_uncommitted")
    return (leader, until, [[o, (v or b"").decode(errors="replace")] for o, v in records],
            [list(r) for r in quarantined])


def _final_state(cluster: LocalCluster, history: History, timeout_s: float, workload: str) -> None:
    bootstrap = cluster.bootstrap
    for topic, partitions in TOPICS.items():
        for p in range(partitions):
            leader, end, records, quarantined = _read_to_end(cluster, topic, p, timeout_s, committed=False)
            history.add("final_log", topic=topic, part=p, high_watermark=end, leader=leader, records=records,
                        quarantined=quarantined)
    if workload == "transactional":
        for p in range(TXN_PARTITIONS):
            _, end, records, _ = _read_to_end(cluster, TXN_TOPIC, p, timeout_s, committed=True)
            history.add("final_txn_log", topic=TXN_TOPIC, part=p, last_stable_offset=end, records=records)
    with Admin(bootstrap, request_timeout_ms=10_000, api_timeout_ms=int(timeout_s * 1000)) as admin:
        for tp, offset in sorted(admin.list_group_offsets(GROUP).items()):
            history.add("final_commit", group=GROUP, topic=tp.topic, part=tp.partition, offset=offset)

    def topic_views() -> dict[int, dict[str, int]] | None:
        views = {}
        for node_id, node in cluster.nodes.items():
            meta = requests.get(f"{node.url}/v1/metadata", timeout=5).json()
            views[node_id] = {t["name"]: len(t["partitions"]) for t in meta["topics"]}
        first = next(iter(views.values()))
        return views if all(v == first for v in views.values()) else None
    try:
        views = poll(topic_views, timeout_s, 0.5, "the same topics on every node")
    except TimeoutError:  # report each node's view: the checker says which one lost what
        views = {i: {t["name"]: len(t["partitions"]) for t in
                     requests.get(f"{n.url}/v1/metadata", timeout=5).json()["topics"]} for i, n in cluster.nodes.items()}
    for node_id, topics in views.items():
        history.add("final_topics", node=node_id, topics=topics)


@contextmanager
def zookeeper_connect(options: ChaosOptions, root: Path) -> Iterator[str | None]:
    """ZooKeeper mode: a one-server ZooKeeper on free ports under `root` for the run (its
    zookeeper.connect, with a chroot); KRaft mode: None."""
    if options.mode == "kraft":
        yield None
        return
    ensemble = ZooKeeperEnsemble(root / "zookeeper", tick_ms=tick_ms_for(options.session_timeout_ms))
    try:
        yield ensemble.start().connect + ZK_CHROOT
    finally:
        ensemble.stop()


def run_chaos(options: ChaosOptions, echo: Callable[[str], None]) -> ChaosOutcome:
    if options.mode not in MODES:
        raise ValueError(f"unknown mode {options.mode!r}; known: {', '.join(MODES)}")
    if options.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {options.workload!r}; known: {', '.join(WORKLOADS)}")
    topics = produced_topics(options.workload)
    node_ids = list(range(1, options.nodes + 1))
    schedule = make_schedule(options.seed, options.duration_s, options.faults, node_ids)
    echo(f"seed {options.seed} ({options.mode} mode): {len(schedule)} faults over {options.duration_s:g} s")
    for event in schedule:
        echo("  " + event.describe())
    root = Path(tempfile.mkdtemp(prefix="kraft-chaos-"))
    skipped: dict[str, str] = {}
    disk_full: DiskFull | None = None
    if any(f in options.faults for f in DISK_FAULTS):
        disk_full = prepare_disk_full(root, node_ids, options.disk_mb)
        echo(disk_full.describe())
    history = History(options.history_path)
    cluster: LocalCluster | None = None
    proxies = LinkProxies(lambda: {n.proc.pid: i for i, n in cluster.nodes.items()  # type: ignore[union-attr]
                                   if n.proc is not None and n.proc.poll() is None})
    delay_files = {i: root / f"fsync-delay-{i}" for i in node_ids}
    stopping = threading.Event()
    workers: list[Any] = []
    late = 0
    zookeeper = ExitStack()  # ZooKeeper mode: the server, stopped after the nodes
    try:
        cluster = LocalCluster(options.nodes, combined=True, overrides=_overrides(options), root=root, proxies=proxies,
                               zookeeper_connect=zookeeper.enter_context(zookeeper_connect(options, root)))
        log_dir_flags: dict[int, Path] = {}
        for i, node in cluster.nodes.items():
            delay_files[i].write_text("0")
            node.env = {FSYNC_DELAY_ENV: str(delay_files[i]), **(disk_full.env(i) if disk_full else {})}
            if "log-dir" in options.faults:  # two log directories, the second one to fail
                args, env, log_dir_flags[i] = log_dir_failure(root, node)
                node.args = [*node.args, *args]
                node.env.update(env)
        with cluster:
            bootstrap = cluster.bootstrap
            with Admin(bootstrap, request_timeout_ms=10_000) as admin:
                for topic, partitions in {**topics, GROW_TOPIC: 1}.items():
                    admin.create_topic(topic, partitions, min(3, options.nodes))
            poll(lambda: recovered(cluster, topics), 120, 0.2, "full ISRs")
            injector = Injector(cluster, proxies, list(topics), delay_files, disk_full, options.seed,
                                lambda s: stopping.wait(s), log_dir_flags)
            history.add("run", mode=options.mode, workload=options.workload, seed=options.seed, duration_s=options.duration_s,
                        faults=options.faults, wall_start=history.wall_start,
                        schedule=[e.as_dict() for e in schedule], skipped=skipped,
                        disk_full=disk_full.method if disk_full else None)
            workers = [
                ProducerWorker("idem", bootstrap, IDEMPOTENT_TOPIC, TOPICS[IDEMPOTENT_TOPIC], True, history),
                ProducerWorker("plain", bootstrap, PLAIN_TOPIC, TOPICS[PLAIN_TOPIC], False, history),
                GroupConsumerWorker("consumer-1", bootstrap, GROUP, list(TOPICS), history),
                GroupConsumerWorker("consumer-2", bootstrap, GROUP, list(TOPICS), history),
                MetadataWorker(bootstrap, GROW_TOPIC, history),
                LeaderMonitor(lambda: [n.url for i, n in cluster.nodes.items() if i not in injector.down],
                              list(topics), lambda: set(injector.down), history, MIN_INSYNC_REPLICAS),
            ]
            if options.workload == "transactional":
                workers += [
                    *(TransactionalProducerWorker(f"txn-{i}", bootstrap, TXN_TOPIC, TXN_PARTITIONS, history,
                                                  options.seed) for i in (1, 2)),
                    ReadCommittedWorker("txn-reader", bootstrap, TXN_TOPIC, TXN_PARTITIONS, history),
                ]
            for worker in workers:
                worker.start()
            start = time.monotonic()
            last_start = options.duration_s - cooldown_s(options.duration_s)
            ready = start  # the warm-up, then each recovery: the next fault waits its gap from there
            for event in schedule:
                wait = ready + event.gap_s - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not event.first_round and time.monotonic() - start + event.duration_s > last_start:
                    # a repeat past the run's end: every requested type was injected already
                    history.add("skipped", fault=event.fault, target=event.target, why="past the run's end")
                    late += 1
                    continue
                if event.fault in skipped:
                    history.add("skipped", fault=event.fault, target=event.target, why=skipped[event.fault])
                    continue
                history.add("fault", **event.as_dict())
                echo(f"[{time.monotonic() - start:6.1f}s] {event.describe()}  "
                     f"(acked {sum(getattr(w, 'acked', 0) for w in workers)})")
                detail = injector.apply(event)
                history.add("heal", fault=event.fault, target=detail.get("target", event.target), detail=detail)
                healed = time.monotonic()
                try:
                    poll(lambda: recovered(cluster, topics), options.recover_timeout_s, 0.2, "recovery")
                    history.add("recovered", fault=event.fault, target=detail.get("target", event.target),
                                seconds=round(time.monotonic() - healed, 2))
                except TimeoutError:
                    history.add("not_recovered", fault=event.fault, target=event.target)
                    echo(f"  not recovered {options.recover_timeout_s:g} s after healing {event.fault}")
                ready = time.monotonic()
            rest = start + options.duration_s - time.monotonic()
            if rest > 0:
                time.sleep(rest)
            for worker in workers:
                worker.stop()
            injector.heal_everything()
            poll(lambda: recovered(cluster, topics), options.recover_timeout_s, 0.5, "final recovery")
            _final_state(cluster, history, options.recover_timeout_s, options.workload)
    finally:
        stopping.set()
        for worker in workers:
            worker.stop(10)
        for fenced in fencings_logged(sorted(root.glob("node-*.log")), history.wall_start):
            history.add("fenced", **fenced)
        history.close()
        proxies.close()
        zookeeper.close()
        if disk_full is not None:
            disk_full.close()
        for log in [*root.glob("node-*.log"), *root.glob("zookeeper/zookeeper-*.log")]:  # next to the history
            shutil.copy(log, f"{options.history_path}.{log.name}")
        shutil.rmtree(root, ignore_errors=True)
    findings = check(load_history(options.history_path))
    if late:
        echo(f"{late} repeats of fault types left out: the run's time was up")
    return ChaosOutcome(findings, schedule, skipped, options.history_path, late,
                        disk_full.method if disk_full else None)

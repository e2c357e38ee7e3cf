"""Real-process test harness: start `kraft-node` processes on 127.0.0.1 with free ports and temp
data dirs, and kill -9, SIGSTOP/SIGCONT, stop and restart them (design §11).

`Cluster` starts a multi-node cluster (controllers, brokers or combined nodes sharing a quorum and
its secret) with helpers to find the active controller and wait for metadata on every node.
Tests wait on conditions with deadlines (`wait_for`), never on fixed sleeps.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import signal
import socket
import subprocess
import sys
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import requests

from kraft.bench.cluster import free_port  # noqa: F401 - one port rule for tests and bench

T = TypeVar("T")

NODE_COMMAND = [sys.executable, "-c", "from kraft.main import main; main()"]


def wait_for(condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.05,
             what: str = "condition") -> T:
    """Poll `condition` until it returns a truthy value (returned) or the deadline passes.

    Exceptions raised by the condition count as "not yet" (a node that is still starting refuses
    connections); the last one is reported if the deadline passes.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except Exception as exc:  # noqa: BLE001 - "not yet" until the deadline
            last_exc = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last error: {last_exc!r}")
        time.sleep(interval)


async def wait_until(condition: Callable[[], T | Awaitable[T]], timeout: float = 30.0, interval: float = 0.01,
                     what: str = "condition") -> T:
    """`wait_for` for async tests, whose code under test runs on the test's own loop: polls without
    blocking it. `condition` may be a coroutine function. An exception it raises is a failure, not
    "not yet" (the state polled is in this process, not a node that is still starting)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bool:
    """Whether the peer closes the connection (EOF or reset) within `timeout`, reading nothing."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


# What every test node runs with unless a test sets it: Kafka's own test brokers
# (TestUtils.createBrokerConfig) take group.initial.rebalance.delay.ms=0, since the 3 s that let
# a real deployment's members arrive together is a wait at every new group's first join.
TEST_NODE_DEFAULTS: dict[str, Any] = {"group.initial.rebalance.delay.ms": 0}


@dataclass
class NodeProcess:
    """One `kraft-node` process. `args` are extra command-line flags; `overrides` are --override."""

    node_id: int
    data_dir: Path
    port: int = field(default_factory=free_port)
    controller_port: int | None = None
    roles: str = "controller,broker"
    quorum: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # added to this process's environment
    proc: subprocess.Popen | None = None
    # start(wait=True) also waits for `?ready=true`: for a node that is ready on its own (a lone
    # combined node); a cluster's node may not be while its peers are down, so the Cluster waits
    wait_ready_on_start: bool = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"node-{self.node_id}.log"

    def command(self) -> list[str]:
        cmd = NODE_COMMAND + [
            "--node-id", str(self.node_id),
            "--role", self.roles,
            "--listen", self.bootstrap,
            "--data-dir", str(self.data_dir),
        ]
        if self.controller_port is not None and "controller" in self.roles:
            cmd += ["--controller-listen", f"127.0.0.1:{self.controller_port}"]
        if self.quorum:
            cmd += ["--controller-quorum", self.quorum]
        for key, value in {**TEST_NODE_DEFAULTS, **self.overrides}.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd + self.args

    def start(self, wait: bool = True, timeout: float = 30.0) -> "NodeProcess":
        assert self.proc is None or self.proc.poll() is not None, "node already running"
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     cwd=self.data_dir.parent, env={**os.environ, **self.env} if self.env else None)
        log.close()
        if wait:
            try:
                self.wait_healthy(timeout)
                if self.wait_ready_on_start:
                    self.wait_ready(timeout)
            except BaseException:
                self.kill()  # one that did not come up in time is not left running (no fixture stops it)
                raise
        return self

    def health(self, timeout: float = 2.0) -> dict[str, Any]:
        response = requests.get(f"{self.url}/v1/health", timeout=timeout)
        response.raise_for_status()
        return response.json()

    def ready(self, timeout: float = 2.0) -> bool:
        """`GET /v1/health?ready=true` answers 200: caught up with the metadata log, knows the
        active controller, and (a broker) registered and unfenced."""
        return requests.get(f"{self.url}/v1/health", params={"ready": "true"}, timeout=timeout).status_code == 200

    def wait_healthy(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"node {self.node_id} exited with {self.proc.returncode}:\n{self.log_tail()}")
            return self.health().get("status") == "ok"
        try:
            wait_for(ready, timeout, what=f"node {self.node_id} healthy")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n--- node log ---\n{self.log_tail()}") from None

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until `?ready=true` answers 200. A node answers plain health as soon as it serves, before
        its broker has registered and been unfenced: a topic created then fails with
        INVALID_REPLICATION_FACTOR (no unfenced broker), and after a restart its partitions have
        no leader until it is unfenced."""
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"node {self.node_id} exited with {self.proc.returncode}:\n{self.log_tail()}")
            return self.ready()
        try:
            wait_for(ready, timeout, what=f"node {self.node_id} ready")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n--- node log ---\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9: no flush, no checkpoints."""
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for the clean shutdown; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise
        return self.proc.returncode

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def restart(self, wait: bool = True) -> "NodeProcess":
        if self.running:
            self.stop()
        return self.start(wait=wait)


def start_node(tmp_dir: Path, node_id: int = 1, **overrides: Any) -> NodeProcess:
    """A single combined node (controller+broker) in `tmp_dir`, started and ready (registered and
    unfenced: it can create topics and lead partitions); so is it after each start()/restart()."""
    node = NodeProcess(node_id=node_id, data_dir=Path(tmp_dir) / f"data-{node_id}",
                       overrides={k.replace("_", "."): v for k, v in overrides.items()}, wait_ready_on_start=True)
    return node.start()


def shutdown_all(nodes: list[NodeProcess]) -> None:
    for node in nodes:
        if node.running:
            try:
                node.stop(timeout=15)
            except Exception:  # noqa: BLE001 - teardown must reach every node
                node.kill()



CLUSTER_SECRET = "kraft-test-cluster-secret"


class Cluster:
    """N `kraft-node` processes forming one cluster: `controllers` voters (ids 1..controllers,
    also brokers when `combined`) and `brokers` broker-only nodes after them, sharing `secret`.

    Every node gets `overrides` (e.g. short session timeouts); broker-only nodes reach the
    controllers through `controller.quorum.bootstrap.servers`."""

    def __init__(self, root: Path, controllers: int = 3, brokers: int = 0, *, combined: bool = False,
                 secret: str = CLUSTER_SECRET, overrides: dict[str, Any] | None = None) -> None:
        self.root = Path(root)
        self.secret = secret
        self.overrides = dict(overrides or {})
        raft_ports = {i: free_port() for i in range(1, controllers + 1)}
        self.quorum = ",".join(f"{i}@127.0.0.1:{p}" for i, p in raft_ports.items())
        self.nodes: dict[int, NodeProcess] = {}
        for i, raft_port in raft_ports.items():
            self.nodes[i] = NodeProcess(
                node_id=i, data_dir=self.root / f"data-{i}", controller_port=raft_port,
                roles="controller,broker" if combined else "controller", quorum=self.quorum,
                overrides={"controller.quorum.secret": secret, **self.overrides})
        bootstrap = ",".join(n.bootstrap for n in self.nodes.values())
        for i in range(controllers + 1, controllers + brokers + 1):
            self.nodes[i] = NodeProcess(
                node_id=i, data_dir=self.root / f"data-{i}", roles="broker", quorum=self.quorum,
                overrides={"controller.quorum.bootstrap.servers": bootstrap, "controller.quorum.secret": secret,
                           **self.overrides})

    # -- membership -------------------------------------------------------------------------------

    def node(self, node_id: int) -> NodeProcess:
        return self.nodes[node_id]

    @property
    def voter_ids(self) -> list[int]:
        return [i for i, n in self.nodes.items() if "controller" in n.roles]

    @property
    def broker_ids(self) -> list[int]:
        return [i for i, n in self.nodes.items() if "broker" in n.roles]

    def running(self) -> list[NodeProcess]:
        return [n for n in self.nodes.values() if n.running]

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> "Cluster":
        for n in self.nodes.values():
            n.start(wait=False)
        try:
            for n in self.nodes.values():
                n.wait_healthy(timeout)
            self.wait_ready(timeout)
        except BaseException:
            self.stop()  # a cluster that did not come up is not left running (no fixture stops it)
            raise
        return self

    def wait_ready(self, timeout: float = 60.0) -> int:
        """One active controller that every running node knows, every running broker live in
        the metadata of every running node, and every running node ready (`?ready=true`: a
        restarted broker stays fenced until it has caught up). Returns the active controller's id."""
        active = self.active_controller(timeout)
        brokers = sorted(i for i in self.broker_ids if self.nodes[i].running)
        self.wait_for_metadata(lambda m: sorted(b["node_id"] for b in m["brokers"]) == brokers, timeout=timeout,
                               what=f"brokers {brokers} live everywhere")
        running = self.running()
        wait_for(lambda: all(n.ready() for n in running), timeout,
                 what=f"nodes {[n.node_id for n in running]} ready")
        return active

    def stop(self) -> None:
        shutdown_all(list(self.nodes.values()))

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].kill()

    def pause(self, node_id: int) -> None:
        self.nodes[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].resume()

    def restart(self, node_id: int, wait: bool = True) -> NodeProcess:
        return self.nodes[node_id].restart(wait=wait)

    def wipe(self, node_id: int) -> None:
        """Delete a stopped node's data dir (a replaced disk)."""
        node = self.nodes[node_id]
        assert not node.running, "stop or kill the node before wiping it"
        shutil.rmtree(node.data_dir, ignore_errors=True)

    # -- observation ------------------------------------------------------------------------------

    def healths(self, nodes: list[NodeProcess] | None = None) -> dict[int, dict[str, Any]]:
        return {n.node_id: n.health() for n in (nodes if nodes is not None else self.running())}

    def active_controller(self, timeout: float = 30.0, exclude: tuple[int, ...] = ()) -> int:
        """The id of the one node that says it is the active controller, once every running node
        (but `exclude`d ones, e.g. a paused node) names it as the controller."""
        def agreed() -> int | None:
            healths = self.healths([n for n in self.running() if n.node_id not in exclude])
            active = [i for i, h in healths.items() if h.get("active_controller")]
            if len(active) == 1 and all(h.get("controller_id") == active[0] for h in healths.values()):
                return active[0]
            return None
        return wait_for(agreed, timeout, what="one active controller agreed by every node")

    def metadata(self, node_id: int, topics: str | None = None) -> dict[str, Any]:
        params = {"topics": topics} if topics else None
        response = requests.get(f"{self.nodes[node_id].url}/v1/metadata", params=params, timeout=5)
        response.raise_for_status()
        return response.json()

    def wait_for_metadata(self, predicate: Callable[[dict[str, Any]], Any], nodes: list[int] | None = None,
                          timeout: float = 30.0, what: str = "metadata") -> dict[int, dict[str, Any]]:
        """Wait until `predicate(GET /v1/metadata)` holds on each node (default: every running
        one); returns the metadata each served."""
        ids = nodes if nodes is not None else [n.node_id for n in self.running()]

        def check() -> dict[int, dict[str, Any]] | None:
            seen = {i: self.metadata(i) for i in ids}
            return seen if all(predicate(m) for m in seen.values()) else None
        return wait_for(check, timeout, what=what)

    def wait_for_same_metadata(self, predicate: Callable[[dict[str, Any]], Any] = bool, timeout: float = 30.0,
                               ) -> dict[str, Any]:
        """Wait until every running node serves the same `/v1/metadata` (changes in flight settle)
        and it satisfies `predicate`; returns it."""
        last: dict[int, dict[str, Any]] = {}

        def agreed() -> dict[str, Any] | None:
            last.clear()
            last.update({n.node_id: self.metadata(n.node_id) for n in self.running()})
            seen = list(last.values())
            return seen[0] if all(m == seen[0] for m in seen) and predicate(seen[0]) else None
        try:
            return wait_for(agreed, timeout, what="the same metadata on every node")
        except TimeoutError as exc:  # say what differed: the test's log then names the lagging node
            raise TimeoutError(f"{exc}; last seen: {json.dumps(last, sort_keys=True)}") from None

    def wait_full_isr(self, topics: list[str], timeout: float = 60.0) -> float:
        """Wait until every partition of `topics` is led and has every replica in its ISR, as
        every running node's metadata has it; the seconds it took (time to full ISR)."""
        started = time.monotonic()
        names = ",".join(topics)

        def full(metadata: dict[str, Any]) -> bool:
            found = [t for t in metadata["topics"] if t["name"] in topics]
            return len(found) == len(topics) and all(
                p["leader"] >= 0 and sorted(p["isr"]) == sorted(p["replicas"])
                for t in found for p in t["partitions"])
        ids = [n.node_id for n in self.running()]
        wait_for(lambda: all(full(self.metadata(i, names)) for i in ids), timeout,
                 what=f"full ISRs of {names} on nodes {ids}")
        return time.monotonic() - started

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1, via: int | None = None,
                     timeout: float = 30.0) -> dict[str, Any]:
        """Create a topic through `via` (default: the first running node) and wait until every
        running node's metadata has it with a leader for each partition. The answer comes once
        the node asked has applied the change; the others (the partition leader among them) apply
        it a moment later, and a produce sent to the leader before that is refused with
        UNKNOWN_TOPIC_OR_PARTITION."""
        node = self.nodes[via] if via is not None else self.running()[0]
        response = requests.post(f"{node.url}/v1/topics", json={
            "name": name, "partitions": partitions, "replication_factor": replication_factor}, timeout=timeout)
        assert response.status_code == 201, response.text
        created = response.json()

        def led_here(metadata: dict[str, Any]) -> bool:
            found = [t for t in metadata["topics"] if t["name"] == name]
            return (len(found) == 1 and len(found[0]["partitions"]) == created["partitions"]
                    and all(p["leader"] is not None and p["leader"] >= 0 for p in found[0]["partitions"]))
        self.wait_for_metadata(led_here, timeout=timeout, what=f"topic {name} with its leaders on every running node")
        return created


# Replication tests want failures noticed in seconds: short sessions and lag, min ISR 2 (RF 3).
REPLICATION_OVERRIDES = {
    "min.insync.replicas": 2,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 300,
}


def partition_state(cluster: Cluster, via: int, topic: str, partition: int = 0) -> dict[str, Any]:
    """One partition (leader, leader_epoch, replicas, isr) as node `via`'s metadata has it."""
    [found] = cluster.metadata(via, topic)["topics"]
    return found["partitions"][partition]


def partition_offsets(node: NodeProcess, topic: str, partition: int = 0) -> dict[str, int]:
    return requests.get(f"{node.url}/v1/topics/{topic}/partitions/{partition}/offsets", timeout=5).json()


def read_values(node_url: str, topic: str, start: int, end: int, partition: int = 0) -> list[tuple[int, str]]:
    """(offset, value) of every record in [start, end) through the JSON records route; a read
    that answers nothing before `end` fails (an empty read is never the answer to corruption)."""
    out, offset = [], start
    while offset < end:
        r = requests.get(f"{node_url}/v1/topics/{topic}/partitions/{partition}/records",
                         params={"offset": offset, "max_records": 10_000}, timeout=10)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["records"], f"empty read at {offset}"
        out += [(x["offset"], x["value"]) for x in body["records"] if x["offset"] < end]
        offset = body["next_offset"]
    return out


def raw_log(directory: Path, end: int) -> bytes:
    """The raw batches of a stopped node's partition log below `end`, to compare replicas byte
    for byte."""
    from kraft.log.config import LogConfig
    from kraft.log.partition_log import PartitionLog

    plog = PartitionLog.open(directory, LogConfig(), 0)
    try:
        out, offset = b"", plog.log_start_offset
        while offset < end:
            info = plog.read(offset, 1 << 20, max_offset=end)
            if not info.records:
                break
            out, offset = out + info.records, info.next_offset
        return out
    finally:
        plog.close()


def poll_assignments(consumers: list[Any]) -> list[set[Any]]:
    """Each group consumer's own view of what it owns, read right after its poll; fails at once if
    two of them own the same partition (the groups' central invariant)."""
    owned = []
    for consumer in consumers:
        consumer.poll(timeout_ms=20)
        owned.append(consumer.assignment())
    seen: set[Any] = set()
    for assignment in owned:
        assert not (seen & assignment), f"{sorted(seen & assignment)} owned by two consumers"
        seen |= assignment
    return owned


def evenly_assigned(consumers: list[Any], partitions: set[Any]) -> bool:
    """After one poll each (checked for double ownership), every partition is owned and each
    consumer holds an equal share."""
    owned = poll_assignments(consumers)
    share = len(partitions) // len(consumers)
    return set().union(*owned) == partitions and all(len(a) == share for a in owned)

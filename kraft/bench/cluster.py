"""A throwaway local cluster for `kraft-bench failover`, `metadata` and `chaos`: `kraft-node`
processes on 127.0.0.1 with free ports (from `--port-range` when given) and data dirs under one
temporary directory, that the benchmark can kill -9 and restart (the measurements need to own the
processes they kill).

With `proxies` (`kraft.bench.chaos.proxy.LinkProxies`), every node listener gets a proxy in front
and the nodes advertise and reach each other only through them, so the harness can cut links.
"""

from __future__ import annotations

import os
import shutil
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import click
import requests

from kraft.security.node_auth import NodeCredential
from kraft.security.peers import PeerSecurity

T = TypeVar("T")
NODE_COMMAND = [sys.executable, "-c", "from kraft.main import main; main()"]
BENCH_SECRET = "kraft-bench"  # the local cluster's controller.quorum.secret


def node_headers(target: int, method: str, path_qs: str, body: bytes | None = None) -> dict[str, str]:
    """The local cluster's node credential for a request to node `target`: the bench calls the
    controller's inter-node routes (topic creation at scale, the snapshot) as one of the
    cluster's nodes would."""
    return PeerSecurity(NodeCredential(0, BENCH_SECRET)).headers(method, path_qs, body, target=target)


_HANDED_OUT: set[int] = set()


@dataclass(frozen=True)
class PortRange:
    """Where the listening ports of the processes a benchmark starts come from (`--port-range
    LOW-HIGH`, both ends included): a firewall or a shared machine may allow only some."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        low, sep, high = text.strip().partition("-")
        if sep and low.strip().isdigit() and high.strip().isdigit():
            ports = cls(int(low), int(high))
            if 1024 <= ports.low <= ports.high <= 65535:
                return ports
        raise ValueError(f"expected LOW-HIGH with 1024 <= LOW <= HIGH <= 65535, got {text!r}")

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"


_port_range: PortRange | None = None  # None: free ports below the kernel's ephemeral range


def use_port_range(ports: PortRange | None) -> None:
    """Every later `free_port()` of this process comes from `ports` (None: the default)."""
    global _port_range
    _port_range = ports


def port_range_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """`--port-range LOW-HIGH` on a command that starts nodes (and ZooKeeper servers) of its own."""
    def use(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is not None:
            try:
                use_port_range(PortRange.parse(value))
            except ValueError as e:
                raise click.BadParameter(str(e)) from None

    return click.option("--port-range", metavar="LOW-HIGH", callback=use, expose_value=False,
                        help="Take the listening ports of the nodes and ZooKeeper servers this command starts from "
                             "LOW-HIGH (both included) [default: free ports below the kernel's ephemeral range].")(f)


def _bind(candidate: int) -> int | None:
    """The port `candidate` (0: one the kernel picks) if it can be bound on 127.0.0.1 now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", candidate))
        except OSError:
            return None
        return s.getsockname()[1]


def _ephemeral_low() -> int:
    """The first port the kernel hands to outgoing connections (Linux: ip_local_port_range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free right now and never handed out before in this process: from the
    `--port-range` when there is one, else chosen below the kernel's ephemeral range: a port
    bound to 0 comes from that range, where any outgoing connection (thousands of short
    inter-node ones under load) can take it between this check and the node's own bind, and the
    node then cannot listen."""
    rng = random.Random()
    if _port_range is not None:
        for candidate in rng.sample(range(_port_range.low, _port_range.high + 1), _port_range.high - _port_range.low + 1):
            if candidate not in _HANDED_OUT and _bind(candidate) is not None:
                _HANDED_OUT.add(candidate)
                return candidate
        raise click.ClickException(f"no free port left in --port-range {_port_range} (this run took "
                                   f"{len(_HANDED_OUT)} ports so far): give a wider range")
    low = _ephemeral_low()
    while True:
        port = _bind(rng.randrange(10_000, low) if low > 11_000 else 0)
        if port is not None and port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def poll(condition: Callable[[], T], timeout_s: float, interval_s: float = 0.01, what: str = "condition") -> T:
    """`condition()` until truthy (exceptions count as "not yet"), or TimeoutError."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = condition()
            if result:
                return result
        except (requests.RequestException, KeyError, IndexError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


@dataclass
class LocalNode:
    node_id: int
    roles: str
    data_dir: Path
    args: list[str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)  # added to the harness's environment

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.data_dir.parent / f"node-{self.node_id}.log", "ab")
        # ZooKeeper mode has no --role: every node is a broker and a candidate controller
        role = [] if "--zookeeper-connect" in self.args else ["--role", self.roles]
        self.proc = subprocess.Popen(NODE_COMMAND + ["--node-id", str(self.node_id), *role,
                                                     "--listen", f"127.0.0.1:{self.port}",
                                                     "--data-dir", str(self.data_dir), *self.args],
                                     stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **self.env} if self.env else None)
        log.close()

    def health(self) -> dict[str, Any]:
        return requests.get(f"{self.url}/v1/health", timeout=2).json()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def rss_bytes(self) -> int:
        """Resident memory of the process (Linux /proc)."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


class LocalCluster:
    """`controllers` voters (combined with the broker role when `combined`) and `brokers`
    broker-only nodes, all with `overrides`; with `zookeeper_connect` (HOST:PORT[/chroot] of a
    running ZooKeeper), `controllers + brokers` nodes in ZooKeeper mode instead (no Raft quorum)."""

    def __init__(self, controllers: int = 3, brokers: int = 0, *, combined: bool = True,
                 overrides: dict[str, Any] | None = None, root: Path | None = None,
                 proxies: Any = None, zookeeper_connect: str | None = None) -> None:
        self._owns_root = root is None  # a caller's root is the caller's to delete
        self.root = root or Path(tempfile.mkdtemp(prefix="kraft-bench-"))
        extra = [a for k, v in (overrides or {}).items() for a in ("--override", f"{k}={v}")]
        raft_ports = {i: free_port() for i in range(1, controllers + 1)} if zookeeper_connect is None else {}
        client_ports = {i: free_port() for i in range(1, controllers + brokers + 1)}
        # what nodes tell each other and clients: the proxies when there are any
        public_raft, public_client = dict(raft_ports), dict(client_ports)
        if proxies is not None:
            public_raft = {i: proxies.listen(i, p) for i, p in raft_ports.items()}
            public_client = {i: proxies.listen(i, p) for i, p in client_ports.items()}
        quorum = ",".join(f"{i}@127.0.0.1:{p}" for i, p in public_raft.items())
        bootstrap = ",".join(f"127.0.0.1:{public_client[i]}" for i in raft_ports)
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in public_client.values())
        self.nodes: dict[int, LocalNode] = {}
        for i in client_ports:
            args = ["--override", f"advertised.listeners=127.0.0.1:{public_client[i]}",
                    "--override", f"controller.quorum.secret={BENCH_SECRET}"]  # every node's credential
            if zookeeper_connect is not None:
                args += ["--zookeeper-connect", zookeeper_connect]
                roles = "controller,broker"
            elif i in raft_ports:
                args += ["--controller-quorum", quorum, "--controller-listen", f"127.0.0.1:{raft_ports[i]}",
                         "--override", f"controller.advertised.listener=127.0.0.1:{public_raft[i]}"]
                roles = "controller,broker" if combined else "controller"
            else:
                args += ["--controller-quorum", quorum,
                         "--override", f"controller.quorum.bootstrap.servers={bootstrap}"]
                roles = "broker"
            self.nodes[i] = LocalNode(i, roles, self.root / f"data-{i}", args + extra, port=client_ports[i])

    def __enter__(self) -> "LocalCluster":
        for node in self.nodes.values():
            node.start()
        try:
            self.wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes.values():
            node.stop()
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def running(self) -> list[LocalNode]:
        return [n for n in self.nodes.values() if n.proc is not None and n.proc.poll() is None]

    def brokers(self) -> list[LocalNode]:
        return [n for n in self.running() if "broker" in n.roles]

    def active_controller(self, timeout_s: float = 60.0) -> LocalNode:
        def agreed() -> LocalNode | None:
            healths = {n.node_id: n.health() for n in self.running()}
            active = [i for i, h in healths.items() if h.get("active_controller")]
            if len(active) == 1 and all(h.get("controller_id") == active[0] for h in healths.values()):
                return self.nodes[active[0]]
            return None
        return poll(agreed, timeout_s, 0.05, "one active controller")

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        self.active_controller(timeout_s)
        poll(lambda: all(n.health().get("broker_state") == "RUNNING" for n in self.brokers()), timeout_s, 0.05,
             "every broker running")

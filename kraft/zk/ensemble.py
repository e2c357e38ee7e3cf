"""A local ZooKeeper ensemble from the Debian `zookeeper` package, for `kraft-bench
compare-metadata` and the ZooKeeper-mode tests: `servers` QuorumPeerMain processes on free ports
of 127.0.0.1, each with its data dir (and `myid`) and a generated `zoo.cfg`, killed by `stop()`.

A short `tick_ms` lets callers use short session timeouts (a server bounds them to
[2, 20] ticks); Kafka's default 18 s session needs a tick of at least 900 ms.

`route_kazoo_logging()` gives the bench's kazoo clients one line format and keeps their
connection retries (kazoo's `Connection dropped: ...` WARNING per attempt, while a server starts
or after one is killed on purpose) at DEBUG.
"""

from __future__ import annotations

import logging
import math
import shutil
import sys
import subprocess
import time
from pathlib import Path

from typing import Any

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
ZK_CONF = Path("/etc/zookeeper/conf")  # its log4j.properties
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def zookeeper_available() -> bool:
    return ZK_JAR.exists() and shutil.which("java") is not None


def _free_port(taken: set[int]) -> int:
    """`kraft.bench.cluster.free_port` (below the ephemeral range, never twice in a process), not in `taken`."""
    from kraft.bench.cluster import free_port  # here: importing kraft.bench imports this module

    while True:
        port = free_port()
        if port not in taken:
            taken.add(port)
            return port


class ConnectionRetries(logging.Filter):
    """kazoo reconnects by itself; its WARNING per dropped or refused attempt becomes DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and record.getMessage().startswith("Connection dropped"):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def route_kazoo_logging(level: int = logging.INFO) -> None:
    """kazoo's records on stderr as `kazoo: LEVEL message`, at `level` and above, its connection
    retries at DEBUG (in a process with no log set-up of its own, such as kraft-bench)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("kazoo: %(levelname)s %(message)s"))
    kazoo = logging.getLogger("kazoo")
    kazoo.handlers[:] = [handler]
    kazoo.setLevel(level)
    kazoo.propagate = False
    client = logging.getLogger("kazoo.client")  # where kazoo's connection logs
    if not any(isinstance(f, ConnectionRetries) for f in client.filters):
        client.addFilter(ConnectionRetries())


def tick_ms_for(session_timeout_ms: int) -> int:
    """The shortest tick (at least 100 ms) whose servers accept `session_timeout_ms` (at most 20 ticks)."""
    return max(100, math.ceil(session_timeout_ms / 20))


class ZooKeeperEnsemble:
    def __init__(self, root: Path, servers: int = 1, tick_ms: int = 100, taken_ports: set[int] | None = None) -> None:
        self.root = Path(root)
        self.tick_ms = tick_ms
        taken = taken_ports if taken_ports is not None else set()
        self.client_ports = [_free_port(taken) for _ in range(servers)]
        self.peer_ports = [(_free_port(taken), _free_port(taken)) for _ in range(servers)] if servers > 1 else []
        self.procs: list[subprocess.Popen | None] = [None] * servers

    @property
    def connect(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def start(self, timeout_s: float = 60.0) -> "ZooKeeperEnsemble":
        for i in range(len(self.client_ports)):
            self.start_server(i)
        deadline = time.monotonic() + timeout_s
        while not self._serving():
            for proc in self.procs:
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"ZooKeeper exited with {proc.returncode}: see {self.root}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"ZooKeeper {self.connect} not serving after {timeout_s:g} s: see {self.root}")
            time.sleep(0.2)
        return self

    def start_server(self, i: int) -> None:
        """Starts server `i` (again: same data dir and ports)."""
        data = self.root / f"zk-{i + 1}"
        data.mkdir(parents=True, exist_ok=True)
        lines = [f"tickTime={self.tick_ms}", f"dataDir={data}", f"clientPort={self.client_ports[i]}",
                 "clientPortAddress=127.0.0.1", "admin.enableServer=false", "maxClientCnxns=0",
                 "4lw.commands.whitelist=*", "initLimit=50", "syncLimit=20"]
        if self.peer_ports:
            (data / "myid").write_text(f"{i + 1}\n")
            lines += [f"server.{n + 1}=127.0.0.1:{peer}:{election}" for n, (peer, election) in enumerate(self.peer_ports)]
        cfg = data / "zoo.cfg"
        cfg.write_text("\n".join(lines) + "\n")
        with open(self.root / f"zookeeper-{i + 1}.log", "ab") as log:
            self.procs[i] = subprocess.Popen(["java", "-Xmx256m", "-cp", f"{ZK_CONF}:{ZK_JAR}", MAIN, str(cfg)],
                                             stdout=log, stderr=subprocess.STDOUT, cwd=self.root)

    def _serving(self) -> bool:
        from kazoo.handlers.threading import KazooTimeoutError

        client = self.client()
        try:
            client.start(timeout=2)
            return True
        except KazooTimeoutError:
            return False
        finally:
            client.stop()
            client.close()

    def client(self, chroot: str = "") -> Any:
        """A kazoo client (the zk extra; imported here so kraft-bench runs without it)."""
        from kazoo.client import KazooClient

        return KazooClient(hosts=self.connect + chroot)

    def stop_server(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def stop(self) -> None:
        for i in range(len(self.procs)):
            self.stop_server(i)

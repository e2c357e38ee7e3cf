"""Real-process test harness: start `kraft-node` processes on 127.0.0.1 with free ports and temp
data dirs, and kill -9, SIGSTOP/SIGCONT, stop and restart them (design §11).

Tests wait on conditions with deadlines (`wait_for`), never on fixed sleeps.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import requests

T = TypeVar("T")

NODE_COMMAND = [sys.executable, "-c", "from kraft.main import main; main()"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    proc: subprocess.Popen | None = None

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
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd + self.args

    def start(self, wait: bool = True, timeout: float = 30.0) -> "NodeProcess":
        assert self.proc is None or self.proc.poll() is not None, "node already running"
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     cwd=self.data_dir.parent)
        log.close()
        if wait:
            self.wait_healthy(timeout)
        return self

    def health(self) -> dict[str, Any]:
        response = requests.get(f"{self.url}/v1/health", timeout=2)
        response.raise_for_status()
        return response.json()

    def wait_healthy(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"node {self.node_id} exited with {self.proc.returncode}:\n{self.log_tail()}")
            return self.health().get("status") == "ok"
        try:
            wait_for(ready, timeout, what=f"node {self.node_id} healthy")
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
    """A single combined node (controller+broker) in `tmp_dir`, started and healthy."""
    node = NodeProcess(node_id=node_id, data_dir=Path(tmp_dir) / f"data-{node_id}",
                       overrides={k.replace("_", "."): v for k, v in overrides.items()})
    return node.start()


def shutdown_all(nodes: list[NodeProcess]) -> None:
    for node in nodes:
        if node.running:
            try:
                node.stop(timeout=15)
            except Exception:  # noqa: BLE001 - teardown must reach every node
                node.kill()


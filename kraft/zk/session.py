"""The node's ZooKeeper session (kazoo): connect (creating the chroot and Kafka's persistent
paths), report session loss to the event loop, and the cluster id of `/cluster/id`.

kazoo runs its own threads: blocking calls go through `asyncio.to_thread`, and watch and state
callbacks are handed to the loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError

from kraft.zk import znodes

log = logging.getLogger("kraft.zk")


class ZkUnavailableError(RuntimeError):
    """ZooKeeper cannot be reached (at start) within zookeeper.connection.timeout.ms."""


@dataclass(frozen=True)
class ZkSettings:
    connect: str
    session_timeout_ms: int = 18_000
    connection_timeout_ms: int = 18_000

    @classmethod
    def from_config(cls, config: Any) -> "ZkSettings":
        return cls(config["zookeeper.connect"], config["zookeeper.session.timeout.ms"],
                   config["zookeeper.connection.timeout.ms"] or config["zookeeper.session.timeout.ms"])


class ZkSession:
    def __init__(self, settings: ZkSettings) -> None:
        self.settings = settings
        hosts, self.chroot = znodes.split_connect(settings.connect)
        self.hosts = hosts
        self.client = KazooClient(hosts=hosts + self.chroot, timeout=settings.session_timeout_ms / 1000)
        self._listeners: list[Callable[[str], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.client.add_listener(self._on_state)

    def on_state(self, callback: Callable[[str], None]) -> None:
        """`callback("LOST" | "SUSPENDED" | "CONNECTED")` on the event loop."""
        self._listeners.append(callback)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            log.warning("ZooKeeper session expired or lost")
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended")
        loop = self._loop
        if loop is not None and not loop.is_closed():
            for callback in self._listeners:
                loop.call_soon_threadsafe(callback, str(state))

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run `callback` on the event loop (from a kazoo thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(callback, *args)

    @property
    def session_id(self) -> int:
        client_id = self.client.client_id
        return client_id[0] if client_id else 0

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        timeout_s = self.settings.connection_timeout_ms / 1000
        if self.chroot:
            # kazoo does not create the chroot; Kafka does
            bootstrap = KazooClient(hosts=self.hosts, timeout=self.settings.session_timeout_ms / 1000)
            self._connect(bootstrap, timeout_s)
            try:
                bootstrap.ensure_path(self.chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        self._connect(self.client, timeout_s)
        for path in znodes.PERSISTENT_PATHS:
            self.client.ensure_path(path)
        log.info("connected to ZooKeeper %s (session 0x%x, timeout %d ms)", self.settings.connect,
                 self.session_id, self.settings.session_timeout_ms)

    def _connect(self, client: KazooClient, timeout_s: float) -> None:
        try:
            client.start(timeout=timeout_s)
        except KazooTimeoutError:
            client.stop()
            client.close()
            raise ZkUnavailableError(
                f"ZooKeeper {self.settings.connect} unreachable within {timeout_s:g} s "
                "(zookeeper.connection.timeout.ms)") from None

    async def stop(self) -> None:
        """Closes the session: this node's ephemeral znodes go at once, not after the timeout."""
        await asyncio.to_thread(self._stop)

    def _stop(self) -> None:
        self.client.stop()
        self.client.close()

    def cluster_id(self, candidate: str) -> str:
        """The cluster id of `/cluster/id`, created with `candidate` by the first node (blocking)."""
        try:
            self.client.create(znodes.CLUSTER_ID, znodes.encode_cluster_id(candidate), makepath=True)
            return candidate
        except NodeExistsError:
            data, _ = self.client.get(znodes.CLUSTER_ID)
            return znodes.decode_cluster_id(data)

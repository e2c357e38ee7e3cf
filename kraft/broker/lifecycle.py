"""The broker's life with the controller (Kafka's `BrokerLifecycleManager`): register with an
incarnation id (broker epoch, endpoints: the HTTP API's first, then the Kafka listeners', rack), heartbeat every `broker.heartbeat.interval.ms`
(the first heartbeat once caught up with the registration unfences the broker), register again
when the controller no longer knows our epoch, and on a controlled shutdown ask to be fenced
(`want_shutdown`) so leaderships move before the process stops.

It talks to the controller through a `ControllerChannel` (local or over HTTP), in the background:
a node serves requests while the quorum is still forming. `wait_unfenced` lets a caller block.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable

from kraft.controller.channel import ControllerChannel

log = logging.getLogger("kraft.broker")

STARTUP_HEARTBEAT_MS = 100  # while registering or fenced: get unfenced quickly
SHUTDOWN_TIMEOUT_S = 5.0


class BrokerLifecycle:
    def __init__(
        self,
        controller: ControllerChannel,
        broker_id: int,
        endpoint: tuple[str, int],
        rack: str | None,
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
        cluster_id: Callable[[], str | None] = lambda: None,
        refused: Callable[[str], None] = lambda reason: None,
    ) -> None:
        """`cluster_id()`: this node's cluster id, if it knows one (the controller refuses
        another cluster's broker); `refused(reason)`: the controller did."""
        self.controller = controller
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.security_protocol = "PLAINTEXT"  # the HTTP endpoint's
        self.kafka_endpoints: list[dict[str, Any]] = []  # the Kafka listeners' (kraft/kafka/node_listeners.py)
        self.rack = rack
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.metadata_offset = metadata_offset
        self.cluster_id = cluster_id
        self.refused = refused
        self.incarnation_id = uuid.uuid4().hex
        self.broker_epoch = -1
        self.fenced = True
        self._unfenced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def state(self) -> str:
        """Kafka's broker states, as far as they apply here."""
        if self.broker_epoch < 0:
            return "STARTING"
        return "FENCED" if self.fenced else "RUNNING"

    async def start(self) -> None:
        """Registers and heartbeats in the background (see `wait_unfenced`)."""
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def wait_unfenced(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._unfenced.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    async def stop(self, controlled: bool) -> None:
        """Stops heartbeating; `controlled`: first ask the controller to fence us (leaderships
        move away at once instead of after the session timeout)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if controlled and self.broker_epoch >= 0:
            try:
                await self.controller.broker_heartbeat(
                    self.broker_id, self.broker_epoch, self.metadata_offset(), want_shutdown=True,
                    timeout_s=SHUTDOWN_TIMEOUT_S)
                log.info("broker %d fenced for a controlled shutdown", self.broker_id)
            except Exception as e:  # no controller reachable: the session timeout fences us
                log.warning("controlled shutdown of broker %d failed: %s", self.broker_id, e)

    async def _register(self) -> None:
        host, port = self.endpoint
        http = {"name": "HTTP", "host": host, "port": port, "security_protocol": self.security_protocol}
        answer = await self.controller.register_broker(
            self.broker_id, self.incarnation_id, [http, *self.kafka_endpoints], self.rack,
            cluster_id=self.cluster_id(), timeout_s=self.heartbeat_interval_ms / 1000 + 5)
        self.broker_epoch = answer["broker_epoch"]
        self.fenced = True
        log.info("registered broker %d, epoch %d", self.broker_id, self.broker_epoch)

    async def _heartbeat(self) -> None:
        answer: dict[str, Any] = await self.controller.broker_heartbeat(
            self.broker_id, self.broker_epoch, self.metadata_offset(),
            timeout_s=self.heartbeat_interval_ms / 1000 + 1)
        if self.fenced != answer["is_fenced"]:
            log.info("broker %d is %s", self.broker_id, "fenced" if answer["is_fenced"] else "unfenced")
        self.fenced = answer["is_fenced"]
        if self.fenced:
            self._unfenced.clear()
        else:
            self._unfenced.set()

    async def _loop(self) -> None:
        failures = 0
        while True:
            try:
                if self.broker_epoch < 0:
                    await self._register()
                await self._heartbeat()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:
                failures += 1
                if getattr(e, "error_code", None) == "STALE_BROKER_EPOCH":
                    self.broker_epoch = -1  # the controller forgot us (unregistered): register anew
                elif getattr(e, "error_code", None) == "INCONSISTENT_CLUSTER_ID":
                    self.refused(f"the active controller refused broker {self.broker_id}: {e}")
                    return  # another cluster's controller: there is nothing to register with
                elif failures == 1 or failures % 20 == 0:
                    log.warning("heartbeat of broker %d failed (%d in a row): %s", self.broker_id, failures, e)
            running = self.broker_epoch >= 0 and not self.fenced
            await asyncio.sleep((self.heartbeat_interval_ms if running else
                                 min(STARTUP_HEARTBEAT_MS, self.heartbeat_interval_ms)) / 1000)

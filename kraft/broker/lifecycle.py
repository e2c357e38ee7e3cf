"""The broker's life with the controller (Kafka's `BrokerLifecycleManager`): register with an
incarnation id, heartbeat every `broker.heartbeat.interval.ms` (the first heartbeat once caught up
unfences the broker), and register again when the controller no longer knows our epoch.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable

from kraft.controller.service import ControllerService

log = logging.getLogger("kraft.broker")


class BrokerLifecycle:
    def __init__(
        self,
        controller: ControllerService,
        broker_id: int,
        endpoint: tuple[str, int],
        rack: str | None,
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
    ) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.rack = rack
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.metadata_offset = metadata_offset
        self.incarnation_id = uuid.uuid4().hex
        self.broker_epoch = -1
        self.fenced = True
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Registers and heartbeats until unfenced, then keeps heartbeating in the background."""
        await self._register()
        await self._heartbeat()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _register(self) -> None:
        host, port = self.endpoint
        answer = await self.controller.register_broker(
            self.broker_id, self.incarnation_id,
            [{"name": "HTTP", "host": host, "port": port}], self.rack,
        )
        self.broker_epoch = answer["broker_epoch"]
        log.info("registered broker %d, epoch %d", self.broker_id, self.broker_epoch)

    async def _heartbeat(self) -> None:
        answer: dict[str, Any] = await self.controller.broker_heartbeat(
            self.broker_id, self.broker_epoch, self.metadata_offset()
        )
        if self.fenced and not answer["is_fenced"]:
            log.info("broker %d is unfenced", self.broker_id)
        self.fenced = answer["is_fenced"]

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            try:
                await self._heartbeat()
            except Exception as e:
                if getattr(e, "error_code", None) == "STALE_BROKER_EPOCH":
                    await self._register()
                else:
                    log.warning("heartbeat of broker %d failed: %s", self.broker_id, e)

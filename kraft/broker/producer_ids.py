"""ProducerIdManager: the producer ids this broker hands to idempotent producers
(`POST /v1/producers/init`), after Kafka's RPCProducerIdManager.

Ids come from blocks the active controller allocates (`ControllerChannel.allocate_producer_ids`,
committed as a ProducerIds metadata record, so no id is ever handed out twice, even across
controller failover); a new block is fetched when the current one runs out. Ids a broker held in
a block it never used are lost at restart, as in Kafka.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from kraft.controller.channel import ControllerChannel


class ProducerIdManager:
    def __init__(self, controller: ControllerChannel, broker_id: int, broker_epoch: Callable[[], int]) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self._next_id = 0
        self._block_end = 0  # exclusive: no ids left when _next_id reaches it
        self._lock = asyncio.Lock()

    async def allocate_producer_id(self) -> int:
        async with self._lock:
            if self._next_id >= self._block_end:
                block = await self.controller.allocate_producer_ids(self.broker_id, self.broker_epoch())
                start, length = int(block["producer_id_start"]), int(block["producer_id_len"])
                assert length > 0 and start >= self._block_end, block
                self._next_id, self._block_end = start, start + length
            producer_id = self._next_id
            self._next_id += 1
            return producer_id

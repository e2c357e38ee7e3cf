"""The leader's channel to the active controller for AlterPartition (ISR shrink and expand).

`AlterPartitionChannel` is what the replica manager calls; `ControllerAlterPartition` adapts any
controller front with ControllerService's `alter_partition(broker_id, broker_epoch, topic,
partition, leader_epoch, partition_epoch, new_isr, request_id=...)` signature: the local
ControllerService on a combined node, or the HTTP controller client on a broker-only one. Unit
tests use a fake channel. A refusal raises an exception carrying `error_code` (FENCED_LEADER_EPOCH,
INVALID_UPDATE_VERSION, NOT_CONTROLLER, ...); the leader then keeps the committed ISR and retries
from the next metadata it sees.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Protocol

from kraft.broker.replication.leader import IsrProposal
from kraft.metadata.partition_change import BrokerState


class AlterPartitionChannel(Protocol):
    async def alter_partition(self, topic: str, partition: int, proposal: IsrProposal) -> None: ...


class ControllerFront(Protocol):
    async def alter_partition(
        self, broker_id: int, broker_epoch: int, topic: str, partition: int, leader_epoch: int,
        partition_epoch: int, new_isr: list[BrokerState], *, request_id: str | None = None,
    ) -> dict[str, Any]: ...


class ControllerAlterPartition:
    def __init__(self, controller: ControllerFront, broker_id: int,
                 broker_epoch: Callable[[], int]) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch

    async def alter_partition(self, topic: str, partition: int, proposal: IsrProposal) -> None:
        await self.controller.alter_partition(
            self.broker_id, self.broker_epoch(), topic, partition, proposal.leader_epoch,
            proposal.partition_epoch, list(proposal.new_isr_with_epochs), request_id=uuid.uuid4().hex,
        )

"""The leader's channel to the active controller for AlterPartition (ISR shrink and expand).

`AlterPartitionChannel` is what the replica manager calls; `ControllerAlterPartition` adapts any
controller front with ControllerService's `alter_partition(broker_id, broker_epoch, topic,
partition, leader_epoch, partition_epoch, new_isr, request_id=...)` signature: the local
ControllerService on a combined node, or the HTTP controller client on a broker-only one. Unit
tests use a fake channel. An accepted change answers the partition's committed state
(`LeaderAndIsr`, None when the answer lacks it), which the leader takes at once. A refusal raises
an exception carrying `error_code` (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, NOT_CONTROLLER,
INELIGIBLE_REPLICA, ...); the leader then keeps the committed ISR and retries from the next
metadata it sees.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Protocol

from kraft.broker.replication.leader import IsrProposal, LeaderAndIsr
from kraft.metadata.partition_change import BrokerState


class AlterPartitionChannel(Protocol):
    async def alter_partition(self, topic: str, partition: int, proposal: IsrProposal) -> LeaderAndIsr | None: ...


class ControllerFront(Protocol):
    async def alter_partition(
        self, broker_id: int, broker_epoch: int, topic: str, partition: int, leader_epoch: int,
        partition_epoch: int, new_isr: list[BrokerState], *, request_id: str | None = None,
    ) -> dict[str, Any]: ...


class ControllerAlterPartition:
    def __init__(self, controller: ControllerFront, broker_id: int, broker_epoch: Callable[[], int],
                 new_request_id: Callable[[], str] | None = None) -> None:
        """`new_request_id`: each request's id (a seeded simulation draws its own)."""
        self.controller = controller
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self._new_request_id = new_request_id or (lambda: uuid.uuid4().hex)

    async def alter_partition(self, topic: str, partition: int, proposal: IsrProposal) -> LeaderAndIsr | None:
        answer = await self.controller.alter_partition(
            self.broker_id, self.broker_epoch(), topic, partition, proposal.leader_epoch,
            proposal.partition_epoch, list(proposal.new_isr_with_epochs), request_id=self._new_request_id(),
        )
        return leader_and_isr(answer)


def leader_and_isr(answer: Any) -> LeaderAndIsr | None:
    """The committed state an AlterPartition answer carries (None: not this shape, e.g. a retry
    answered `{"duplicate": true}`)."""
    try:
        return LeaderAndIsr(int(answer["leader"]), int(answer["leader_epoch"]), int(answer["partition_epoch"]),
                            tuple(int(b) for b in answer["isr"]))
    except (KeyError, TypeError, ValueError):
        return None

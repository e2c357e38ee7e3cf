"""KIP-890's verification kept at the current leader of each partition of the open transactions
this coordinator owns.

A partition leader holds the verification in memory (`log/producer_state.py`): a new leader has
none. Kafka's leader asks the coordinator when a transaction's first batch comes without one
(AddPartitionsToTxn verifyOnly, by the Produce's transactional id); kraft's HTTP produce carries
no transactional id, so the coordinator sends it again instead: for every partition whose leader
epoch changed in the metadata (`on_leaders_changed`), and for every partition of the Ongoing
transactions a `__transaction_state` load finds (the previous coordinator's may have gone to a
leader that is gone). Each push is retried until the leader the metadata names took it, while the
transaction is still Ongoing at that producer id and epoch with that partition; meanwhile the
new leader answers its first batch NOT_ENOUGH_REPLICAS (the client retries).

The markers of a transaction wait for its pushes in flight (`settle`): a verification landing
after the marker would let a late batch of the finished transaction start one no coordinator
knows (a hanging transaction).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable

from kraft.broker.transactions.state import TopicPartition, TransactionMetadata, TxnState
from kraft.errors import KraftError
from kraft.metadata.image import MetadataImage

log = logging.getLogger("kraft.transactions")

Verify = Callable[[TopicPartition, int, int], Awaitable[None]]


@dataclass
class _Push:
    task: asyncio.Task[None] | None = None
    sending: bool = False  # a request is in flight: it must land before the markers go


class LeaderVerifications:
    def __init__(self, verify: Verify, image: Callable[[], MetadataImage],
                 current: Callable[[int, str], TransactionMetadata | None],
                 backoff_ms: int, max_backoff_ms: int) -> None:
        """`verify(tp, producer_id, producer_epoch)`: the push to `tp`'s leader (raises KraftError);
        `current(partition, transactional_id)`: the id's committed metadata while this broker
        coordinates `__transaction_state` `partition` (None otherwise)."""
        self.verify = verify
        self.image = image
        self.current = current
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self._pushes: dict[str, dict[TopicPartition, _Push]] = {}

    def push(self, partition: int, meta: TransactionMetadata, tps: Iterable[TopicPartition]) -> None:
        """Verification of `meta`'s transaction at the current leaders of `tps` (one push per
        partition at a time: a running one reads the metadata again before it stops)."""
        pushes = self._pushes.setdefault(meta.transactional_id, {})
        for tp in tps:
            if tp in pushes:
                continue
            push = pushes[tp] = _Push()
            push.task = asyncio.get_running_loop().create_task(
                self._run(partition, meta, tp, push), name=f"txn verification {meta.transactional_id} {tp}")

    async def settle(self, transactional_id: str) -> None:
        """Before a transaction's markers: its pushes stop, those in flight once they land."""
        pushes = list(self._pushes.get(transactional_id, {}).values())
        for push in pushes:
            if not push.sending and push.task is not None:
                push.task.cancel()
        await asyncio.gather(*(p.task for p in pushes if p.task is not None), return_exceptions=True)

    async def close(self) -> None:
        tasks = [p.task for pushes in self._pushes.values() for p in pushes.values() if p.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _wanted(self, partition: int, meta: TransactionMetadata, tp: TopicPartition) -> bool:
        now = self.current(partition, meta.transactional_id)
        return (now is not None and now.state is TxnState.ONGOING and tp in now.partitions
                and (now.producer_id, now.producer_epoch) == (meta.producer_id, meta.producer_epoch))

    async def _run(self, partition: int, meta: TransactionMetadata, tp: TopicPartition, push: _Push) -> None:
        backoff = self.backoff_ms
        try:
            while self._wanted(partition, meta, tp):
                reg = self.image().partition(*tp)
                if reg is None:
                    return  # deleted: its marker is skipped too
                push.sending = True
                try:
                    await self.verify(tp, meta.producer_id, meta.producer_epoch)
                    moved = (self.image().partition(*tp) or reg).leader_epoch != reg.leader_epoch
                    if not moved:
                        return
                except KraftError as e:
                    log.info("verification of %r at %s-%d waits: %s", meta.transactional_id, tp[0], tp[1], e)
                finally:
                    push.sending = False
                if not self._wanted(partition, meta, tp):
                    return
                await asyncio.sleep(backoff / 1000)
                backoff = min(backoff * 2, self.max_backoff_ms)
        finally:
            pushes = self._pushes.get(meta.transactional_id, {})
            if pushes.get(tp) is push:
                del pushes[tp]
                if not pushes:
                    del self._pushes[meta.transactional_id]

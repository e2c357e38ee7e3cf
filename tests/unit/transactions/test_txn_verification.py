"""The coordinator's KIP-890 verification pushes to new partition leaders (`LeaderVerifications`):
retried until the leader the metadata names took it, sent again when the leadership moved during
a push, stopped once the transaction is no longer Ongoing, and awaited by the markers while one
is in flight (a verification landing after the marker could start a hanging transaction)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from kraft.broker.transactions.state import TransactionMetadata, TxnState
from kraft.broker.transactions.verification import LeaderVerifications
from kraft.errors import KraftError

from harness import wait_until  # tests/ is on sys.path (tests/conftest.py)

TP = ("orders", 0)
ONGOING = TransactionMetadata("tx", 5, 0, 60_000, TxnState.ONGOING, frozenset({TP}), 0, 0)


@dataclass
class _Registration:
    leader_epoch: int


class _Image:
    def __init__(self) -> None:
        self.leader_epoch = 1

    def partition(self, topic: str, partition: int) -> _Registration:
        return _Registration(self.leader_epoch)


class Harness:
    def __init__(self) -> None:
        self.image = _Image()
        self.meta: TransactionMetadata | None = ONGOING
        self.sent: list[int] = []  # the leader epoch each push was sent at
        self.answers: list[KraftError | None] = []  # None: taken; the last one repeats
        self.gate: asyncio.Event | None = None  # holds a push in flight
        self.verifications = LeaderVerifications(self.verify, lambda: self.image,  # type: ignore[arg-type]
                                                 lambda partition, tid: self.meta, 1, 4)

    async def verify(self, tp: tuple[str, int], producer_id: int, producer_epoch: int) -> None:
        assert (tp, producer_id, producer_epoch) == (TP, 5, 0)
        self.sent.append(self.image.leader_epoch)
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers.pop(0) if len(self.answers) > 1 else (self.answers or [None])[0]
        if answer is not None:
            raise answer

    async def idle(self) -> None:
        await wait_until(lambda: not self.verifications._pushes, 5, 0.001, "no push running")


async def test_a_push_is_retried_until_the_new_leader_takes_it() -> None:
    h = Harness()
    h.answers = [KraftError("NOT_LEADER_OR_FOLLOWER", "not yet"), KraftError("NOT_LEADER_OR_FOLLOWER", "not yet"), None]
    h.verifications.push(0, ONGOING, [TP])
    h.verifications.push(0, ONGOING, [TP])  # one push per partition at a time
    await asyncio.wait_for(h.idle(), 5)
    assert h.sent == [1, 1, 1]


async def test_a_leader_that_moves_during_a_push_is_verified_too() -> None:
    h = Harness()
    h.gate = asyncio.Event()
    h.verifications.push(0, ONGOING, [TP])
    await asyncio.sleep(0)
    h.image.leader_epoch = 2  # the metadata moved the leadership while the push was in flight
    h.verifications.push(0, ONGOING, [TP])  # the running push covers it
    h.gate.set()
    await asyncio.wait_for(h.idle(), 5)
    assert h.sent == [1, 2]


async def test_pushes_stop_when_the_transaction_ends_and_the_markers_wait_for_one_in_flight() -> None:
    h = Harness()
    h.gate = asyncio.Event()
    h.answers = [KraftError("NOT_LEADER_OR_FOLLOWER", "not yet")]
    h.verifications.push(0, ONGOING, [TP])
    await asyncio.sleep(0)
    h.meta = replace(ONGOING, state=TxnState.PREPARE_COMMIT)  # EndTxn: the markers follow
    settled = asyncio.ensure_future(h.verifications.settle("tx"))
    await asyncio.sleep(0.01)  # a window: settle must still wait for the request in flight
    assert not settled.done()  # the request in flight lands first
    h.gate.set()
    await asyncio.wait_for(settled, 5)
    assert h.sent == [1] and not h.verifications._pushes
    h.verifications.push(0, h.meta, [TP])  # no longer Ongoing: nothing is sent
    await asyncio.wait_for(h.idle(), 5)
    assert h.sent == [1]

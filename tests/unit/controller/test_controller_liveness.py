"""The controller under load: requests committed in groups (one batch for what queued meanwhile,
each validated after the ones before it), heartbeats that never wait behind a commit, fences
that a late heartbeat still stops, and sessions that a stalled controller does not count."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest
from controller_fake_quorum import FakeQuorum
from harness import wait_until
from test_controller_service import SESSION_MS, Clock, add_brokers, error_of, members, started_controller

from kraft.controller.errors import MetadataStorageError
from kraft.controller.handlers import ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.service import ControllerService


class GatedQuorum(FakeQuorum):
    """Commits only while `gate` is open: a slow disk or a slow majority."""

    def __init__(self, node_id: int = 1) -> None:
        super().__init__(node_id)
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = 0  # proposals held at the closed gate

    async def propose(self, records, request_id=None):
        self.waiting += 1
        try:
            await self.gate.wait()
        finally:
            self.waiting -= 1
        return await super().propose(records, request_id)


async def held(ctl) -> None:
    """Until a commit waits at the closed gate."""
    await wait_until(lambda: ctl.quorum.waiting == 1, what="a commit held at the gate")


async def queued(ctl, requests: int) -> None:
    """Until this many requests wait behind the held commit."""
    await wait_until(lambda: len(ctl._commits._queue) == requests, what=f"{requests} requests queued")


@pytest.fixture
async def ctl():
    service = await started_controller(
        GatedQuorum(node_id=1),
        ControllerSettings(num_partitions=1, default_replication_factor=3, broker_session_timeout_ms=SESSION_MS),
        rng=random.Random(3))
    yield service
    await service.close()


async def shrink_requests(ctl, epochs, partitions: int):
    """One AlterPartition per partition, each taking a follower out of the ISR."""
    calls = []
    for p in range(partitions):
        reg = ctl.image.partition("t", p)
        follower = next(b for b in reg.isr if b != reg.leader)
        isr = [b for b in reg.isr if b != follower]
        calls.append(ctl.alter_partition(reg.leader, epochs[reg.leader], "t", p, reg.leader_epoch,
                                         reg.partition_epoch, members(isr, epochs)))
    return calls


async def test_requests_queued_during_a_commit_share_the_next_one(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=20, replication_factor=3)
    before = len(ctl.quorum.proposals)
    ctl.quorum.gate.clear()  # a slow commit: everything after it queues
    blocker = asyncio.ensure_future(ctl.create_topics("other", partitions=1, replication_factor=3))
    await held(ctl)
    shrinks = [asyncio.ensure_future(c) for c in await shrink_requests(ctl, epochs, 20)]
    await queued(ctl, 20)
    ctl.quorum.gate.set()
    answers = await asyncio.gather(*shrinks)
    await blocker
    assert all(len(a["isr"]) == 2 and a["partition_epoch"] == 1 for a in answers)
    assert all(len(ctl.image.partition("t", p).isr) == 2 for p in range(20))
    # the 20 AlterPartitions committed as one batch after the create, not one commit each
    assert len(ctl.quorum.proposals) - before == 2


async def test_a_request_in_a_group_sees_the_records_of_those_before_it(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=1, replication_factor=3)
    ctl.quorum.gate.clear()
    blocker = asyncio.ensure_future(ctl.create_topics("other", partitions=1, replication_factor=3))
    await held(ctl)
    [first] = await shrink_requests(ctl, epochs, 1)
    [second] = await shrink_requests(ctl, epochs, 1)  # the same partition epoch: a stale copy
    first, second = asyncio.ensure_future(first), asyncio.ensure_future(second)
    twice = [asyncio.ensure_future(ctl.create_topics("x", partitions=1, replication_factor=3)) for _ in range(2)]
    await queued(ctl, 4)
    ctl.quorum.gate.set()
    await blocker
    assert (await first)["partition_epoch"] == 1
    assert await error_of(second) == "INVALID_UPDATE_VERSION"
    results = await asyncio.gather(*twice, return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == ["MetadataError", "dict"]  # TOPIC_ALREADY_EXISTS


async def test_a_heartbeat_that_changes_nothing_does_not_wait_for_a_commit(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2, 3])
    ctl.quorum.gate.clear()  # the disk stalls: nothing commits
    stuck = asyncio.ensure_future(ctl.create_topics("t", partitions=1, replication_factor=3))
    await held(ctl)
    ctl.clock.now += SESSION_MS - 1
    answer = await asyncio.wait_for(ctl.broker_heartbeat(2, epochs[2], ctl.image.offset), 1)
    assert answer["is_fenced"] is False
    ctl.clock.now += SESSION_MS - 1  # past broker 1's and 3's sessions, not broker 2's
    fences = asyncio.ensure_future(ctl.check_sessions())
    await wait_until(lambda: ctl._commits._queue, what="the fences queued behind the held commit")
    # broker 3 heartbeats while its fence waits for the commit: it is not fenced after all
    await asyncio.wait_for(ctl.broker_heartbeat(3, epochs[3], ctl.image.offset), 1)
    ctl.quorum.gate.set()
    assert sorted(await fences) == [1, 3]
    await stuck
    cluster = ctl.image.cluster
    assert (cluster.broker(1).fenced, cluster.broker(2).fenced, cluster.broker(3).fenced) == (True, False, False)


async def test_a_heartbeat_that_unfences_renews_the_session_before_it_commits(ctl) -> None:
    epochs = await add_brokers(ctl, [1, 2])
    r = await ctl.register_broker(3, "inc-3", [{"name": "HTTP", "host": "127.0.0.1", "port": 9003}])
    ctl.quorum.gate.clear()
    unfence = asyncio.ensure_future(ctl.broker_heartbeat(3, r["broker_epoch"], ctl.image.offset))
    await held(ctl)
    assert not unfence.done()  # a state change waits for its commit
    ctl.quorum.gate.set()
    assert (await unfence)["is_fenced"] is False
    assert epochs and not ctl.image.cluster.broker(3).fenced


async def test_a_stalled_controller_does_not_fence_the_brokers_it_did_not_hear(ctl) -> None:
    await add_brokers(ctl, [1, 2])
    ctl.clock.now += SESSION_MS // 2
    ctl._heartbeats.credit_stall(SESSION_MS)  # the controller's loop was held up this long
    ctl.clock.now += SESSION_MS // 2 + 1
    assert await ctl.check_sessions() == []
    ctl.clock.now += SESSION_MS
    assert sorted(await ctl.check_sessions()) == [1, 2]


async def test_the_session_task_measures_its_own_stalls() -> None:
    quorum, loader, clock = FakeQuorum(node_id=1), MetadataLoader(), Clock()
    service = ControllerService(1, quorum, loader, ControllerSettings(broker_session_timeout_ms=SESSION_MS),
                                clock_ms=clock, session_check_interval_ms=50)
    await service.start()
    try:
        await add_brokers(service, [1])
        clock.now += 10 * SESSION_MS  # the whole process stopped (SIGSTOP) for a long while
        await asyncio.sleep(0.2)  # a few session checks: the stall is credited, nobody fenced
        assert not service.image.cluster.broker(1).fenced
    finally:
        await service.close()


async def test_a_retry_of_an_unknown_outcome_is_committed_alone(ctl) -> None:
    """A request id whose first proposal timed out may be in the log already: it must head its
    own batch, where the log's dedup finds it, never ride in another request's batch."""
    await add_brokers(ctl, [1, 2, 3])
    timeout = type("Timeout", (Exception,), {"error_code": "REQUEST_TIMED_OUT"})
    ctl.quorum.lose_answer_next = timeout("outcome unknown")
    with pytest.raises(timeout):
        await ctl.create_topics("t", partitions=1, replication_factor=3, request_id="req-1")
    committed = len(ctl.quorum.log)
    ctl.quorum.gate.clear()
    blocker = asyncio.ensure_future(ctl.create_topics("a", partitions=1, replication_factor=3))
    await held(ctl)
    other = asyncio.ensure_future(ctl.create_topics("b", partitions=1, replication_factor=3))
    retry = asyncio.ensure_future(ctl.create_topics("t", partitions=1, replication_factor=3, request_id="req-1"))
    await queued(ctl, 2)
    ctl.quorum.gate.set()
    await asyncio.gather(blocker, other)
    answer = await retry
    assert answer.get("duplicate") or answer["name"] == "t"
    assert ctl.image.topic_by_name("b") is not None and ctl.image.topic_by_name("t") is not None
    topics = [r for r in ctl.quorum.log[committed:] if r["type"] == "Topic"]
    assert sorted(r["name"] for r in topics) == ["a", "b"]  # "t" was not written twice


async def test_replicas_on_an_offline_log_directory_lose_their_leaderships_and_isr_memberships(ctl) -> None:
    """KIP-858: a heartbeat naming the broker's replicas on an offline log directory moves those
    leaderships and ISR memberships to other brokers (a last ISR member stays, leaderless, as a
    fenced one does); its other replicas, and the broker itself, are untouched."""
    epochs = await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=4, replication_factor=3)
    await ctl.create_topics("solo", partitions=1, replication_factor=1)
    solo = ctl.image.partition("solo", 0).leader
    led = [p for p in range(4) if ctl.image.partition("t", p).leader == solo]
    offline = [("t", p) for p in range(2)] + [("solo", 0)]
    answer = await ctl.broker_heartbeat(solo, epochs[solo], ctl.image.offset, offline_log_dirs=["dir-b"],
                                        offline_replicas=offline)
    assert answer["is_fenced"] is False and not ctl.image.cluster.broker(solo).fenced
    for p in range(4):
        reg = ctl.image.partition("t", p)
        if p < 2:
            assert solo not in reg.isr and reg.leader not in (solo, -1), reg
        else:
            assert solo in reg.isr and (reg.leader == solo) == (p in led), reg
    assert ctl.image.partition("solo", 0).leader == -1 and ctl.image.partition("solo", 0).isr == (solo,)
    offset = ctl.image.offset
    await ctl.broker_heartbeat(solo, epochs[solo], offset, offline_log_dirs=["dir-b"], offline_replicas=offline)
    assert ctl.image.offset == offset  # nothing left to move: answered without a commit


async def test_an_unfenced_broker_does_not_lead_its_offline_replicas(ctl) -> None:
    epochs = await add_brokers(ctl, [1])
    await ctl.create_topics("solo", partitions=2, replication_factor=1)
    await ctl.broker_heartbeat(1, epochs[1], ctl.image.offset, want_fence=True)
    assert ctl.image.partition("solo", 0).leader == -1
    await ctl.broker_heartbeat(1, epochs[1], ctl.image.offset, offline_replicas=[("solo", 0)])
    assert ctl.image.partition("solo", 0).leader == -1 and ctl.image.partition("solo", 1).leader == 1


class FailingJournal(FakeQuorum):
    """A metadata log whose appends fail while `failing` (a full or failed disk)."""

    def __init__(self) -> None:
        super().__init__(node_id=1)
        self.failing = False
        self.refused = 0

    async def propose(self, records, request_id=None):
        if self.failing:
            self.refused += 1
            raise MetadataStorageError("metadata log append failed: the journal write failed")
        return await super().propose(records, request_id)


async def test_the_session_task_does_not_log_a_failed_journal_again(caplog) -> None:
    """The quorum logs a journal that cannot be written once; the session task's fences that it
    refuses meanwhile are tried again at the next check, not logged as errors at every check
    (found by the control-plane simulation)."""
    quorum = FailingJournal()
    service = ControllerService(1, quorum, MetadataLoader(), ControllerSettings(broker_session_timeout_ms=100),
                                session_check_interval_ms=20)
    await service.start()
    try:
        await add_brokers(service, [1])
        quorum.failing = True  # broker 1 heartbeats no more: its fence is refused at every check
        await wait_until(lambda: quorum.refused >= 2, what="two fences refused by the journal")
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
        quorum.failing = False
        await wait_until(lambda: service.image.cluster.broker(1).fenced, what="the fence once the journal heals")
    finally:
        await service.close()

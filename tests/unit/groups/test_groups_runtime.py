"""The group coordinator on the coordinator runtime, over a fake `__consumer_offsets` log (real
log files; appends that fail, stay in flight or land uncommitted) and a manual clock: sessions and
rebalance timeouts are timers that fire once, when due (an idle coordinator wakes nobody); the
state seen by every request is committed state; a failed append leaves the groups as they were and
answers the append's error; an append that may still commit makes the coordinator read the log
again; a partition written before the runtime existed loads to what that coordinator answered."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from coordinator_fakes import FakePartitions, ManualScheduler
from kraft.api.errors import KraftError
from kraft.server.groups import GroupHeartbeat, OffsetCommitEntry
from kraft.broker.groups.coordinator import CoordinatorSettings, GroupCoordinator
from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.broker.groups.membership import GroupConfig
from kraft.broker.groups.shard import OFFSETS_EXPIRY, REVOCATION, SESSION
from kraft.coordinator.result import CoordinatorResult
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    ClaimController, Endpoint, Partition, PartitionChange, RegisterBroker, Topic, UnfenceBroker,
)

CONFIG = GroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
CHECK_INTERVAL = 600_000
FIXTURE = Path(__file__).parents[2] / "fixtures" / "consumer_offsets_v1"


def image(**counts: int) -> MetadataImage:
    records: list[Any] = [
        ClaimController(node_id=1, controller_epoch=1),
        RegisterBroker(broker_id=1, incarnation_id="inc-1", broker_epoch=100,
                       endpoints=(Endpoint("HTTP", "127.0.0.1", 9092),), controller_epoch=1),
        UnfenceBroker(broker_id=1, broker_epoch=100, controller_epoch=1),
    ]
    for name, count in {OFFSETS_TOPIC: 1, "a": 4, "b": 2, **counts}.items():
        records.append(Topic(name=name, topic_id=f"{name}-id", controller_epoch=1))
        records += [Partition(topic_id=f"{name}-id", partition=p, replicas=(1,), isr=(1,), leader=1,
                              controller_epoch=1) for p in range(count)]
    return apply_records(MetadataImage.EMPTY, enumerate(records))[1]


def beat(member_id: str, epoch: int, topics: tuple[str, ...] | None = None, regex: str | None = None,
         owned: Any = None, rebalance_timeout_ms: int = 300_000) -> GroupHeartbeat:
    return GroupHeartbeat(member_id, epoch, "client", "10.0.0.1", topics, regex, None, owned, rebalance_timeout_ms)


def owned(answer: dict[str, Any]) -> frozenset[tuple[str, int]]:
    return frozenset((a["topic"], p) for a in answer["assignment"] for p in a["partitions"])


class WireShaped:
    """The coordinator, its typed answers as the HTTP API's bodies (dicts and lists): the shape
    the fixture recorded of the coordinator before the runtime."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._coordinator, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return msgspec.json.decode(msgspec.json.encode(await attr(*args, **kwargs)))
        return call


class Groups:
    def __init__(self, directory: Path, clock: ManualScheduler | None = None) -> None:
        self.partitions = FakePartitions(directory, OFFSETS_TOPIC)
        self.clock = clock or ManualScheduler()
        self.coordinator = WireShaped(GroupCoordinator(
            1, self.partitions, admin=None,  # type: ignore[arg-type]
            settings=CoordinatorSettings(num_partitions=1, replication_factor=1, group=CONFIG,
                                         offsets_retention_check_interval_ms=CHECK_INTERVAL),
            clock=self.clock.clock, scheduler=self.clock))
        self.coordinator.metadata_cache.set_image(image())

    async def elect(self, epoch: int = 0) -> None:
        self.coordinator.runtime.on_election(0, epoch)
        await self.coordinator.runtime.active(0, 5)

    async def barrier(self) -> None:
        """Everything queued before has run."""
        await self.coordinator.runtime.write(0, "barrier", lambda shard, now: CoordinatorResult((), None))

    def timers(self) -> dict[Any, int]:
        return self.coordinator.runtime._contexts[0].timer.scheduled()  # type: ignore[union-attr]

    async def members(self, group_id: str) -> list[str]:
        answer = await self.coordinator.describe_group(group_id)
        return [m["member_id"] for m in answer["members"]]

    async def offsets(self, group_id: str) -> list[int]:
        return [o["offset"] for o in (await self.coordinator.fetch_offsets(group_id, None))["offsets"]]

    async def close(self) -> None:
        await self.coordinator.close()
        self.partitions.close()


@pytest.fixture
async def groups(tmp_path: Path):
    g = Groups(tmp_path)
    await g.elect()
    yield g
    await g.close()


async def test_a_session_times_out_once_when_due_and_nothing_else_wakes(groups: Groups) -> None:
    joined = await groups.coordinator.heartbeat("g", beat("", 0, topics=("a",)))
    member = joined["member_id"]
    assert groups.timers().keys() == {OFFSETS_EXPIRY, (SESSION, "g", member)}
    assert groups.clock.advance(CONFIG.session_timeout_ms - 1) == 0  # no tick in between
    await groups.coordinator.heartbeat("g", beat(member, joined["member_epoch"], owned=owned(joined)))
    assert groups.clock.advance(CONFIG.session_timeout_ms - 1) == 0  # renewed by the heartbeat
    assert await groups.members("g") == [member]
    assert groups.clock.advance(1) == 1
    await groups.barrier()
    assert (await groups.coordinator.list_groups())["groups"] == []  # no members, no offsets
    assert groups.timers().keys() == {OFFSETS_EXPIRY}
    assert groups.clock.ran == 1


async def test_a_member_that_does_not_revoke_in_time_is_fenced(groups: Groups) -> None:
    first = await groups.coordinator.heartbeat("g", beat("", 0, topics=("a",), rebalance_timeout_ms=3_000))
    second = await groups.coordinator.heartbeat("g", beat("", 0, topics=("a",)))
    asked = await groups.coordinator.heartbeat("g", beat(first["member_id"], first["member_epoch"], owned=owned(first)))
    assert (REVOCATION, "g", first["member_id"]) in groups.timers()
    for _ in range(2):  # it heartbeats but never gives the partitions up
        groups.clock.advance(1_000)
        await groups.coordinator.heartbeat("g", beat(first["member_id"], asked["member_epoch"], owned=owned(first)))
    assert groups.clock.advance(1_000) == 1
    await groups.barrier()
    assert await groups.members("g") == [second["member_id"]]
    taken = await groups.coordinator.heartbeat("g", beat(second["member_id"], second["member_epoch"], owned=owned(second)))
    assert owned(taken) == {("a", p) for p in range(4)}


async def test_every_request_sees_committed_state_only(groups: Groups) -> None:
    """While a join's record is in flight, the group is as it was; once it fails, too."""
    await groups.coordinator.commit_offsets("g", "", -1, [OffsetCommitEntry("a", 0, 5, "")])
    groups.partitions.hold(0)
    joining = asyncio.create_task(groups.coordinator.heartbeat("g", beat("", 0, topics=("a",))))
    while groups.partitions.appends < 2:
        await asyncio.sleep(0)
    assert await groups.members("g") == [] and await groups.offsets("g") == [5]
    groups.partitions.release(0)
    joined = await joining
    assert await groups.members("g") == [joined["member_id"]]


@pytest.mark.parametrize("outcome, answered", [("refuse", "COORDINATOR_NOT_AVAILABLE"),
                                               ("not_leader", "NOT_COORDINATOR")])
async def test_a_failed_append_leaves_the_groups_as_they_were(groups: Groups, outcome: str, answered: str) -> None:
    await groups.coordinator.commit_offsets("g", "", -1, [OffsetCommitEntry("a", 0, 5, "")])
    groups.partitions.outcomes[0].append(outcome)
    with pytest.raises(KraftError) as e:
        await groups.coordinator.commit_offsets("g", "", -1, [OffsetCommitEntry("a", 0, 6, "")])
    assert e.value.error_code == answered
    assert await groups.offsets("g") == [5]
    groups.partitions.outcomes[0].append(outcome)
    with pytest.raises(KraftError) as e:
        await groups.coordinator.heartbeat("h", beat("", 0, topics=("a",)))
    assert e.value.error_code == answered
    assert [g["group_id"] for g in (await groups.coordinator.list_groups())["groups"]] == ["g"]
    assert groups.timers().keys() == {OFFSETS_EXPIRY}  # no session for a member that never joined
    joined = await groups.coordinator.heartbeat("h", beat("", 0, topics=("a",)))  # the next one works
    assert await groups.members("h") == [joined["member_id"]]


async def test_an_append_that_may_still_commit_is_read_back_from_the_log(groups: Groups) -> None:
    """The join's record was appended, not replicated in time: the client hears the error, and
    once the followers catch up the group has the member, as the log says (it does not roll back
    what may yet commit)."""
    groups.partitions.outcomes[0].append("uncommitted")
    with pytest.raises(KraftError) as e:
        await groups.coordinator.heartbeat("g", beat("", 0, topics=("a",)))
    assert e.value.error_code == "COORDINATOR_NOT_AVAILABLE"
    groups.partitions.commit(0)
    [member] = await groups.members("g")
    assert (SESSION, "g", member) in groups.timers()  # the reloaded member has a session


async def test_a_timer_waits_for_a_regex_resolution_it_lacks(groups: Groups) -> None:
    """A member's session ends right after a topic appeared: the other member's regex is not
    resolved for the new image yet, so the fencing runs again shortly, once it is."""
    regex = await groups.coordinator.heartbeat("g", beat("", 0, regex="a|c"))
    plain = await groups.coordinator.heartbeat("g", beat("", 0, topics=("a",)))
    groups.coordinator.metadata_cache.set_image(image(c=1))
    groups.clock.advance(CONFIG.session_timeout_ms - 1)
    await groups.coordinator.heartbeat("g", beat(regex["member_id"], regex["member_epoch"]))  # resolves it
    groups.coordinator.metadata_cache.set_image(image(c=2))  # and the topics change again
    assert groups.clock.advance(1) == 1  # plain's session ends
    await groups.barrier()
    assert sorted(await groups.members("g")) == sorted([regex["member_id"], plain["member_id"]])
    await asyncio.sleep(0)  # the resolution the handler started completes
    assert groups.clock.advance(500) == 1
    await groups.barrier()
    assert await groups.members("g") == [regex["member_id"]]


async def timers_scheduled_during(seconds: float) -> int:
    """How many timers the event loop is given while this task sleeps `seconds` (its own sleep
    not counted): wake-ups counted, not time measured."""
    loop = asyncio.get_running_loop()
    scheduled: list[Any] = []
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        scheduled.append(callback)
        return call_at(when, callback, *args, **kwargs)

    loop.call_at = counting  # type: ignore[method-assign]
    try:
        await asyncio.sleep(seconds)  # the subject: the window whose wake-ups are counted
    finally:
        del loop.call_at  # type: ignore[attr-defined]
    return len(scheduled) - 1


async def test_an_idle_coordinator_schedules_nothing_on_the_event_loop(tmp_path: Path) -> None:
    """With a loaded partition and a member, the event loop gets no timer from the coordinator
    over half a second (the old coordinator ticked every 250 ms)."""
    partitions = FakePartitions(tmp_path, OFFSETS_TOPIC)
    coordinator = GroupCoordinator(1, partitions, admin=None,  # type: ignore[arg-type]
                                   settings=CoordinatorSettings(num_partitions=1, replication_factor=1, group=CONFIG))
    coordinator.metadata_cache.set_image(image())
    try:
        coordinator.runtime.on_election(0, 0)
        await coordinator.heartbeat("g", beat("", 0, topics=("a",)))
        assert await timers_scheduled_during(0.5) == 0
    finally:
        await coordinator.close()
        partitions.close()


async def test_a_request_waits_for_a_leader_on_the_metadata_not_a_poll(groups: Groups) -> None:
    """Without a leader for the group's partition, a request waits for the next image (the old
    coordinator looked again every 50 ms)."""
    leaderless = apply_records(image(), [(1000, PartitionChange(
        topic_id=f"{OFFSETS_TOPIC}-id", partition=0, leader=-1, isr=(1,), controller_epoch=1))])[1]
    groups.coordinator.runtime.on_resignation(0)
    groups.coordinator.metadata_cache.set_image(leaderless)
    finding = asyncio.create_task(groups.coordinator.find_coordinator("g"))
    assert await timers_scheduled_during(0.3) <= 1  # the request's own deadline
    assert not finding.done()
    groups.coordinator.metadata_cache.set_image(image())
    assert (await finding)["coordinator"]["node_id"] == 1


async def test_a_partition_written_before_the_runtime_loads_to_what_was_answered(tmp_path: Path) -> None:
    """tests/fixtures/consumer_offsets_v1: written by the coordinator before the runtime (its
    make.py), with what that coordinator answered about it."""
    shutil.copytree(FIXTURE / f"{OFFSETS_TOPIC}-0", tmp_path / f"{OFFSETS_TOPIC}-0")
    expected = json.loads((FIXTURE / "expected.json").read_text())
    groups = Groups(tmp_path)
    try:
        groups.partitions.commit(0)
        await groups.elect()
        coordinator = groups.coordinator
        listed = (await coordinator.list_groups())["groups"]  # (fields added since: not compared)
        assert [{k: g[k] for k in e} for g, e in zip(listed, expected["groups"])] == expected["groups"]
        assert len(listed) == len(expected["groups"])
        for group_id, offsets in expected["offsets"].items():
            assert (await coordinator.fetch_offsets(group_id, None))["offsets"] == offsets
            described = await coordinator.describe_group(group_id)
            want = expected["described"][group_id]
            if "members" in want:  # (member fields added since: not compared)
                described["members"] = [{k: m[k] for k in w} for m, w in zip(described["members"], want["members"])]
            assert {k: described[k] for k in want} == want
        live = expected["described"]["live"]["members"]
        revoking = [m["member_id"] for m in live if m["pending_revocation"]]
        assert groups.timers().keys() == ({OFFSETS_EXPIRY} | {(SESSION, "live", m["member_id"]) for m in live}
                                          | {(REVOCATION, "live", m) for m in revoking})
        # and the new coordinator writes on: a member keeps going, a successor replays it all
        [reader] = [m for m in live if m["subscribed_topic_regex"]]
        answer = await coordinator.heartbeat("live", beat(reader["member_id"], reader["member_epoch"], owned=frozenset()))
        await coordinator.commit_offsets("simple", "", -1, [OffsetCommitEntry("a", 0, 9, "")])
    finally:
        await groups.close()
    successor = Groups(tmp_path)
    try:
        await successor.elect()
        described = await successor.coordinator.describe_group("live")
        assert [m["member_epoch"] for m in described["members"] if m["member_id"] == reader["member_id"]] == [
            answer["member_epoch"]]
        assert await successor.offsets("simple") == [9, 7]
    finally:
        await successor.close()

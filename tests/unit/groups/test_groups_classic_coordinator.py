"""Classic groups in the group coordinator, on the coordinator runtime over a fake
`__consumer_offsets` log and a manual clock: JoinGroups wait for each other and are answered when
the join completes (by the last member's join or by the delayed first rebalance's timer); a
follower's SyncGroup is answered by the leader's; sessions expire on timers; a failover (a new
leader epoch) keeps the group, its generation and assignment; waiting requests get NOT_COORDINATOR
on resignation; a group cannot mix protocols; offsets commit with the generation."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from kio.schema.consumer_protocol_assignment.v0 import ConsumerProtocolAssignment as Assignment
from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition as AssignedTopic
from kio.schema.consumer_protocol_subscription.v0 import ConsumerProtocolSubscription as Subscription
from kio.serial import entity_writer

import pytest

from kraft.errors import KraftError
from kraft.server.groups import OffsetCommitEntry, TopicPartitions
from kraft.broker.groups.classic import ClassicConfig, JoinRequest
from kraft.broker.groups.classic_handlers import CLASSIC_JOIN, CLASSIC_SESSION
from kraft.broker.groups.membership import GroupConfig
from test_groups_runtime import Groups, beat

import test_groups_runtime

DELAY = 3_000
CLASSIC_CONFIG = GroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000,
                             classic=ClassicConfig(initial_rebalance_delay_ms=DELAY))


def encoded(schema, **fields) -> bytes:
    """A consumer protocol struct as clients send it: version 0, then the struct."""
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00")
    entity_writer(schema)(buffer, schema(**fields))
    return buffer.getvalue()


SUBSCRIPTION = encoded(Subscription, topics=("a",), user_data=None)


def assignment(*partitions: int) -> bytes:
    return encoded(Assignment, assigned_partitions=(AssignedTopic(topic="a", partitions=partitions),), user_data=None)


def join(member_id: str = "", instance: str | None = None) -> JoinRequest:
    return JoinRequest(member_id, instance, "consumer", (("range", SUBSCRIPTION),),
                       session_timeout_ms=10_000, rebalance_timeout_ms=20_000, client_id="client")


async def error_of(call) -> KraftError:
    with pytest.raises(KraftError) as e:
        await call
    return e.value


@pytest.fixture
async def groups(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(test_groups_runtime, "CONFIG", CLASSIC_CONFIG)
    g = Groups(tmp_path)
    g.coordinator = g.coordinator._coordinator  # typed answers: JoinGroup's and SyncGroup's carry bytes
    await g.elect()
    yield g
    await g.close()


async def member_id(groups: Groups, instance: str | None = None) -> str:
    """A new member's id: MEMBER_ID_REQUIRED's (static members join at once)."""
    e = await error_of(groups.coordinator.join_group("g", join()))
    assert e.error_code == "MEMBER_ID_REQUIRED"
    return e.extra["member_id"]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_joins_wait_for_the_delayed_first_rebalance_then_sync(groups: Groups) -> None:
    c = groups.coordinator
    m1, m2 = await member_id(groups), await member_id(groups)
    first = asyncio.create_task(c.join_group("g", join(m1)))
    second = asyncio.create_task(c.join_group("g", join(m2)))
    await groups.barrier()
    await settle()
    assert not first.done() and not second.done()
    assert (CLASSIC_JOIN, "g") in groups.timers()
    assert groups.clock.advance(DELAY) >= 1  # the join timer completes the rebalance
    leader, follower = await first, await second
    assert leader.generation_id == follower.generation_id == 1 and leader.leader_id == m1
    assert {m.member_id for m in leader.members} == {m1, m2} and follower.members == ()
    waiting = asyncio.create_task(c.sync_group("g", m2, None, 1, "consumer", "range", {}))
    await groups.barrier()
    await settle()
    assert not waiting.done()
    given = {m1: assignment(0, 1), m2: assignment(2, 3)}
    assert await c.sync_group("g", m1, None, 1, "consumer", "range", given) == given[m1]
    assert await waiting == given[m2]
    await c.classic_heartbeat("g", m2, None, 1)
    await c.commit_offsets("g", m2, 1, [OffsetCommitEntry("a", 2, 42, "")])
    described = await c.describe_group("g")
    assert (described.group_type, described.state, described.assignor, described.group_epoch) == \
        ("classic", "Stable", "range", 1)
    assert [(m.member_id, m.subscribed_topics, m.assignment) for m in described.members] == sorted(
        [(m1, ("a",), (TopicPartitions("a", (0, 1)),)), (m2, ("a",), (TopicPartitions("a", (2, 3)),))])
    assert [(o.partition, o.current_offset, o.member_id) for o in described.offsets] == \
        [(0, None, m1), (1, None, m1), (2, 42, m2), (3, None, m2)]
    classic = await c.describe_classic("g")  # DescribeGroups: the bytes as the members sent them
    assert (classic.state, classic.protocol) == ("Stable", "range")
    assert {(m.member_id, m.metadata, m.assignment) for m in classic.members} == \
        {(m1, SUBSCRIPTION, given[m1]), (m2, SUBSCRIPTION, given[m2])}
    assert (await c.describe_classic("nobody")).state == "Dead"
    assert (await error_of(c.commit_offsets("g", m2, 0, [OffsetCommitEntry("a", 2, 43, "")]))).error_code \
        == "ILLEGAL_GENERATION"
    listed = (await c.list_groups()).groups
    assert [(g.group_id, g.state, g.members, g.group_type) for g in listed] == [("g", "Stable", 2, "classic")]


async def test_a_member_that_stops_heartbeating_is_removed_and_the_others_rejoin(groups: Groups) -> None:
    c = groups.coordinator
    m1, m2 = await member_id(groups), await member_id(groups)
    joins = [asyncio.create_task(c.join_group("g", join(m))) for m in (m1, m2)]
    await groups.barrier()
    groups.clock.advance(DELAY)
    await asyncio.gather(*joins)
    await c.sync_group("g", m1, None, 1, None, None, {m1: b"x", m2: b"y"})
    await c.sync_group("g", m2, None, 1, None, None, {})
    groups.clock.advance(5_000)
    await c.classic_heartbeat("g", m1, None, 1)  # m1 beats, m2 does not
    groups.clock.advance(5_000)
    await groups.barrier()
    assert (CLASSIC_SESSION, "g", m2) not in groups.timers()
    e = await error_of(c.classic_heartbeat("g", m1, None, 1))
    assert e.error_code == "REBALANCE_IN_PROGRESS"
    rejoined = await c.join_group("g", join(m1))  # the only member left: completes at once
    assert rejoined.generation_id == 2 and [m.member_id for m in rejoined.members] == [m1]


async def test_a_failover_keeps_the_group_and_fails_what_waits(groups: Groups) -> None:
    c = groups.coordinator
    m1 = await member_id(groups)
    joining = asyncio.create_task(c.join_group("g", join(m1)))
    await groups.barrier()
    groups.clock.advance(DELAY)
    await joining
    await c.sync_group("g", m1, None, 1, None, None, {m1: b"mine"})
    m2 = await member_id(groups)
    parked = asyncio.create_task(c.join_group("g", join(m2)))  # waits for m1 to rejoin
    await groups.barrier()
    await settle()
    assert not parked.done()
    await groups.elect(epoch=1)  # a new leader epoch: the partition is loaded again from the log
    assert (await error_of(parked)).error_code == "NOT_COORDINATOR"
    shard = await c.runtime.active(0, 5)
    group = shard.groups["g"].classic
    assert group is not None and group.generation_id == 1 and group.members[m1].assignment == b"mine"
    assert (CLASSIC_SESSION, "g", m1) in groups.timers() and (CLASSIC_JOIN, "g") in groups.timers()


async def test_a_group_cannot_mix_protocols(groups: Groups) -> None:
    c = groups.coordinator
    await c.heartbeat("kip848", beat("", 0, topics=("a",)))
    assert (await error_of(c.join_group("kip848", join()))).error_code == "INCONSISTENT_GROUP_PROTOCOL"
    static = asyncio.create_task(c.join_group("classic", join(instance="i1")))  # no MEMBER_ID_REQUIRED
    await groups.barrier()
    e = await error_of(c.heartbeat("classic", beat("", 0, topics=("a",))))
    assert e.error_code == "INCONSISTENT_GROUP_PROTOCOL"
    assert await c.leave_group("classic", [("", "i1")]) == [None]
    assert (await error_of(static)).error_code == "UNKNOWN_MEMBER_ID"  # it left while it waited
    groups.clock.advance(DELAY)  # the delayed join completes with nobody: Empty
    await groups.barrier()
    joined = await c.heartbeat("classic", beat("", 0, topics=("a",)))  # empty: it may change protocol
    assert joined.member_epoch > 0

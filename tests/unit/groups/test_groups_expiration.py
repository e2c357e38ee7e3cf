"""Offset expiration (offsets.retention.minutes, KIP-211): the pure rule, then the coordinator's
check writing tombstones that a new coordinator replays (the expiry survives failover)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, strategies as st

from coordinator_fakes import FakePartitions
from kraft.broker.groups.coordinator import CoordinatorSettings, GroupCoordinator
from kraft.broker.groups.expiration import base_timestamp, expired_offsets, removes_group, subscribed_topics
from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.broker.groups.membership import ConsumerGroup, GroupConfig, HeartbeatRequest, OffsetAndMetadata
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController, Partition, Topic
from kraft.server.groups import GroupHeartbeat, OffsetCommitEntry

RETENTION = 60_000
CONFIG = GroupConfig(session_timeout_ms=10_000)
TOPICS = {"a": 2, "b": 2, "c": 1}


def group_with(offsets: dict[tuple[str, int], int], members: dict[str, tuple[str, ...]] | None = None,
               regex: str | None = None) -> ConsumerGroup:
    """Offsets committed at the given times; members subscribed to the given topics."""
    g = ConsumerGroup("g", CONFIG)
    for member_id, topics in (members or {}).items():
        g.heartbeat(HeartbeatRequest("", 0, subscribed_topics=topics), TOPICS, member_id)
    if regex is not None:
        g.heartbeat(HeartbeatRequest("", 0, subscribed_topic_regex=regex), TOPICS, "rx")
    g.offsets = {tp: OffsetAndMetadata(1, "", ts) for tp, ts in offsets.items()}
    return g


def test_simple_group_offsets_expire_retention_after_their_commit() -> None:
    g = group_with({("a", 0): 1_000, ("a", 1): 5_000})
    assert expired_offsets(g, 1_000 + RETENTION - 1, RETENTION) == []
    assert expired_offsets(g, 1_000 + RETENTION, RETENTION) == [("a", 0)]
    assert not removes_group(g, [("a", 0)])
    assert expired_offsets(g, 5_000 + RETENTION, RETENTION) == [("a", 0), ("a", 1)]
    assert removes_group(g, [("a", 0), ("a", 1)])


def test_subscribed_topics_never_expire_while_members_subscribe() -> None:
    g = group_with({("a", 0): 0, ("b", 0): 0, ("c", 0): 0}, {"m1": ("a",)}, regex="^b$")
    assert subscribed_topics(g) == {"a", "b"}
    later = 10 * RETENTION
    assert expired_offsets(g, later, RETENTION) == [("c", 0)]  # the topic nobody consumes
    assert not removes_group(g, [("c", 0)])  # members: the group stays


def test_an_emptied_group_keeps_its_offsets_retention_after_it_became_empty() -> None:
    g = group_with({("a", 0): 0}, {"m1": ("a",)})
    g.remove_member("m1")
    g.empty_since_ms = 5 * RETENTION  # the last member left long after the commit
    assert base_timestamp(g, g.offsets[("a", 0)]) == 5 * RETENTION
    assert expired_offsets(g, 6 * RETENTION - 1, RETENTION) == []
    assert expired_offsets(g, 6 * RETENTION, RETENTION) == [("a", 0)]
    g.offsets[("a", 1)] = OffsetAndMetadata(1, "", 7 * RETENTION)  # an admin reset after it emptied
    assert expired_offsets(g, 7 * RETENTION, RETENTION) == [("a", 0)]


@given(
    commits=st.dictionaries(st.tuples(st.sampled_from("abc"), st.integers(0, 1)), st.integers(0, 10**6),
                            max_size=6),
    subscriptions=st.lists(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True), max_size=3),
    empty_since=st.none() | st.integers(0, 10**6),
    now=st.integers(0, 3 * 10**6),
    retention=st.integers(1, 10**6),
)
def test_rule(commits, subscriptions, empty_since, now, retention) -> None:
    """An offset expires iff nobody subscribes to its topic and `retention` passed since both its
    commit and (for a group without members) the moment the group became empty."""
    g = group_with(commits, {f"m{i}": tuple(s) for i, s in enumerate(subscriptions)})
    g.empty_since_ms = empty_since
    expired = expired_offsets(g, now, retention)
    subscribed = {t for s in subscriptions for t in s}
    for tp, offset in g.offsets.items():
        since = offset.commit_timestamp_ms
        if not g.members and empty_since is not None:
            since = max(since, empty_since)
        assert (tp in expired) == (tp[0] not in subscribed and now - since >= retention)
    assert removes_group(g, expired) == (not g.members and set(expired) == set(g.offsets))
    assert expired == sorted(expired)


# -- the coordinator's check -------------------------------------------------------------------


@dataclass
class Clock:
    now: int = 1_000_000

    def __call__(self) -> int:
        return self.now


def led_image() -> MetadataImage:
    records = [ClaimController(node_id=1, controller_epoch=1),
               Topic(name=OFFSETS_TOPIC, topic_id="offsets-id", controller_epoch=1),
               Partition(topic_id="offsets-id", partition=0, replicas=(1,), isr=(1,), leader=1,
                         controller_epoch=1),
               Topic(name="a", topic_id="a-id", controller_epoch=1),
               Partition(topic_id="a-id", partition=0, replicas=(1,), isr=(1,), leader=1, controller_epoch=1)]
    return apply_records(MetadataImage.EMPTY, enumerate(records))[1]


async def loaded_coordinator(partitions: FakePartitions, clock: Clock) -> GroupCoordinator:
    coordinator = GroupCoordinator(
        1, partitions, admin=None,  # type: ignore[arg-type]
        settings=CoordinatorSettings(num_partitions=1, replication_factor=1, group=CONFIG,
                                     offsets_retention_ms=RETENTION),
        clock=clock)
    coordinator.metadata_cache.set_image(led_image())
    coordinator.runtime.on_election(0, 0)
    await coordinator.runtime.active(0, 5)
    return coordinator


def beat(member_id: str, epoch: int, topics: tuple[str, ...] | None = None) -> GroupHeartbeat:
    return GroupHeartbeat(member_id, epoch, "client", "host", topics, None, None, None, 300_000)


async def offsets_of(coordinator: GroupCoordinator, group: str) -> list[int]:
    return [o.offset for o in (await coordinator.fetch_offsets(group, None)).offsets]


async def test_expiry_writes_tombstones_that_a_new_coordinator_replays(tmp_path: Path) -> None:
    partitions = FakePartitions(tmp_path, OFFSETS_TOPIC)
    clock = Clock()
    coordinator = await loaded_coordinator(partitions, clock)
    try:
        await coordinator.commit_offsets("simple", "", -1, [OffsetCommitEntry("a", 0, 5, "")])
        joined = await coordinator.heartbeat("member", beat("", 0, ("a",)))
        await coordinator.commit_offsets("member", joined.member_id, joined.member_epoch,
                                         [OffsetCommitEntry("a", 0, 7, "")])
        clock.now += RETENTION
        assert await coordinator.expire_offsets() == 1  # the simple group's; the member's stays
        assert await offsets_of(coordinator, "simple") == [] and await offsets_of(coordinator, "member") == [7]
        assert (await coordinator.list_groups()).groups[0].group_id == "member"
        await coordinator.heartbeat("member", beat(joined.member_id, -1))  # leaves
        clock.now += RETENTION - 1
        assert await coordinator.expire_offsets() == 0  # retention counts from the leave
        clock.now += 1
        assert await coordinator.expire_offsets() == 1
        assert (await coordinator.list_groups()).groups == ()
    finally:
        await coordinator.close()
        partitions.close()
    partitions = FakePartitions(tmp_path, OFFSETS_TOPIC)
    successor = await loaded_coordinator(partitions, clock)  # the records alone: what a failover replays
    try:
        assert (await successor.list_groups()).groups == ()
        assert await offsets_of(successor, "simple") == [] and await offsets_of(successor, "member") == []
    finally:
        await successor.close()
        partitions.close()

"""GroupShard's handlers, pure: they change nothing, their records replay into what they answered,
and they say which timers a member needs (a heartbeat renews its session; being asked to revoke
starts its rebalance timeout, releasing ends it; leaving or being fenced cancels both); a load
gives every member a fresh session."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.broker.groups.membership import GroupConfig, HeartbeatRequest, RegexTopics, every_match
from kraft.broker.groups.records import group_key
from kraft.broker.groups.shard import OFFSETS_EXPIRY, REVOCATION, SESSION, GroupShard
from kraft.broker.groups.topic_counts import TopicPartitionCounts
from kraft.coordinator.result import CancelTimer, CoordinatorRecord, CoordinatorResult, ScheduleTimer
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController, Partition, Topic

CONFIG = GroupConfig(session_timeout_ms=10_000)
NOW = 1_000_000


def topics_image(**counts: int) -> MetadataImage:
    records: list = [ClaimController(node_id=1, controller_epoch=1)]
    for name, count in {OFFSETS_TOPIC: 1, **counts}.items():
        records.append(Topic(name=name, topic_id=f"{name}-id", controller_epoch=1))
        records += [Partition(topic_id=f"{name}-id", partition=p, replicas=(1,), isr=(1,), leader=1,
                              controller_epoch=1) for p in range(count)]
    return apply_records(MetadataImage.EMPTY, enumerate(records))[1]


@dataclass
class Environment:
    image: MetadataImage = field(default_factory=lambda: topics_image(a=4))

    changed: list[str] = field(default_factory=list)

    def regex_topics(self, image: MetadataImage) -> RegexTopics:
        return every_match(TopicPartitionCounts(image))

    def group_changed(self, partition: int, group_id: str) -> None:
        self.changed.append(group_id)

    def unloaded(self, partition: int) -> None:
        pass


class Committed:
    """A shard and the log its results are appended to (every append commits)."""

    def __init__(self) -> None:
        self.shard = GroupShard(0, Environment(), CONFIG, 60_000, 5_000)
        self.log: list[CoordinatorRecord] = []

    def apply(self, result: CoordinatorResult) -> CoordinatorResult:
        for key, value in result.records:
            self.log.append(CoordinatorRecord(len(self.log), key, value))
            self.shard.replay(self.log[-1])
        return result


def join(topics=("a",)) -> HeartbeatRequest:
    return HeartbeatRequest("", 0, subscribed_topics=topics, rebalance_timeout_ms=3_000)


def timer_keys(result: CoordinatorResult) -> list[tuple]:
    return [(type(t).__name__, t.key) for t in result.timers]


def test_a_heartbeat_changes_nothing_until_its_record_is_replayed() -> None:
    log = Committed()
    result = log.shard.heartbeat("g", join(), "m1", NOW)
    assert log.shard.groups == {}  # the handler only says what to write
    assert [k for k, _ in result.records] == [group_key("g")]
    assert timer_keys(result) == [("ScheduleTimer", (SESSION, "g", "m1"))]
    assert result.timers[0].deadline_ms == NOW + CONFIG.session_timeout_ms
    log.apply(result)
    member = log.shard.groups["g"].members["m1"]
    assert (member.member_epoch, member.assigned) == (result.response.member_epoch, result.response.assignment)
    again = log.shard.heartbeat("g", HeartbeatRequest("m1", member.member_epoch), "unused", NOW + 5)
    assert again.records == ()  # nothing changed: nothing to write, the session is renewed
    assert again.timers[0].deadline_ms == NOW + 5 + CONFIG.session_timeout_ms


def test_revoking_starts_the_rebalance_timeout_and_releasing_ends_it() -> None:
    log = Committed()
    first = log.apply(log.shard.heartbeat("g", join(), "m1", NOW)).response
    log.apply(log.shard.heartbeat("g", join(), "m2", NOW))
    asked = log.apply(log.shard.heartbeat("g", HeartbeatRequest("m1", first.member_epoch, owned=first.assignment),
                                          "unused", NOW + 1))
    assert ("ScheduleTimer", (REVOCATION, "g", "m1")) in timer_keys(asked)
    revoking = log.shard.groups["g"].members["m1"]
    assert revoking.pending_revocation
    [timer] = [t for t in asked.timers if t.key == (REVOCATION, "g", "m1")]
    assert timer.deadline_ms == NOW + 1 + 3_000
    still = log.shard.heartbeat("g", HeartbeatRequest("m1", revoking.member_epoch, owned=first.assignment),
                                "unused", NOW + 2)
    assert ("ScheduleTimer", (REVOCATION, "g", "m1")) not in timer_keys(still)  # the deadline stands
    released = log.apply(log.shard.heartbeat("g", HeartbeatRequest("m1", revoking.member_epoch, owned=revoking.assigned),
                                             "unused", NOW + 3))
    assert ("CancelTimer", (REVOCATION, "g", "m1")) in timer_keys(released)


def test_leaving_and_fencing_cancel_the_members_timers() -> None:
    log = Committed()
    log.apply(log.shard.heartbeat("g", join(), "m1", NOW))
    log.apply(log.shard.heartbeat("g", join(), "m2", NOW))
    left = log.apply(log.shard.heartbeat("g", HeartbeatRequest("m1", -1), "unused", NOW))
    assert timer_keys(left) == [("CancelTimer", (SESSION, "g", "m1")), ("CancelTimer", (REVOCATION, "g", "m1"))]
    fenced = log.shard.fence_expired(NOW, group_id="g", member_id="m2", reason="session")
    assert timer_keys(fenced) == [("CancelTimer", (SESSION, "g", "m2")), ("CancelTimer", (REVOCATION, "g", "m2"))]
    assert log.shard.groups["g"].members.keys() == {"m2"}  # not yet: the record is not replayed
    log.apply(fenced)
    assert "g" not in log.shard.groups  # no members and no offsets: gone
    assert log.shard.fence_expired(NOW, group_id="g", member_id="m2", reason="session").records == ()


def test_a_load_gives_every_member_a_fresh_session() -> None:
    log = Committed()
    first = log.apply(log.shard.heartbeat("g", join(), "m1", NOW)).response
    log.apply(log.shard.heartbeat("g", join(), "m2", NOW))
    log.apply(log.shard.heartbeat("g", HeartbeatRequest("m1", first.member_epoch, owned=first.assignment),
                                  "unused", NOW))
    successor = GroupShard(0, Environment(), CONFIG, 60_000, 5_000)
    for record in log.log:  # what a new coordinator loads
        successor.replay(record)
    later = NOW + 50_000
    timers = {t.key: t.deadline_ms for t in successor.on_loaded(later) if isinstance(t, ScheduleTimer)}
    assert timers == {
        OFFSETS_EXPIRY: later + 5_000,
        (SESSION, "g", "m1"): later + CONFIG.session_timeout_ms,
        (SESSION, "g", "m2"): later + CONFIG.session_timeout_ms,
        (REVOCATION, "g", "m1"): later + 3_000,  # it still has partitions to give up
    }
    assert not any(isinstance(t, CancelTimer) for t in successor.on_loaded(later))

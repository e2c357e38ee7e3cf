"""Offset expiration (`offsets.retention.minutes`, KIP-211), pure: which committed offsets of a
group expire at `now_ms`. The coordinator's timer writes their tombstones.

The rule, after Kafka's `OffsetMetadataManager.cleanupExpiredOffsets`:
- an offset of a topic the group's members subscribe to never expires while they do (Kafka's
  `isSubscribedToTopic`: the topics their subscriptions name or their regexes matched);
- any other offset expires `retention_ms` after its base timestamp: the commit's timestamp, and for
  a group that had members and has none now, no earlier than the moment it became empty (KIP-211:
  "offsets of a group expire offsets.retention.minutes after the group became empty"; a simple
  group, which only commits, counts from each commit);
- a group without members whose offsets all expired is removed.
See docs/groups.md and docs/decisions.md.
"""

from __future__ import annotations

from kraft.broker.groups.assignors import TopicPartition
from kraft.broker.groups.membership import ConsumerGroup, OffsetAndMetadata


def subscribed_topics(group: ConsumerGroup) -> frozenset[str]:
    """The topics the group's members subscribe to: named ones, and what their regexes matched
    when the target assignment was computed (`subscribed_counts`). A classic group's are in its
    members' consumer protocol subscriptions; one that does not use that protocol keeps every
    offset while it has members (Kafka's ClassicGroup.offsetExpirationCondition)."""
    if group.classic is not None:
        if not group.classic.members:
            return frozenset()
        topics = group.classic.subscribed_topics()
        return topics if topics is not None else frozenset(t for t, _ in group.offsets)
    if not group.members:
        return frozenset()
    named = {t for m in group.members.values() for t in m.subscribed_topics}
    return frozenset(named | group.subscribed_counts.keys())


def base_timestamp(group: ConsumerGroup, offset: OffsetAndMetadata) -> int:
    """From when `offset`'s retention counts."""
    if group.has_members or group.empty_since_ms is None:
        return offset.commit_timestamp_ms
    return max(offset.commit_timestamp_ms, group.empty_since_ms)


def expired_offsets(group: ConsumerGroup, now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """The partitions whose committed offsets expire at `now_ms`, sorted."""
    assert retention_ms > 0, retention_ms
    subscribed = subscribed_topics(group)
    return sorted(tp for tp, offset in group.offsets.items()
                  if tp[0] not in subscribed and now_ms - base_timestamp(group, offset) >= retention_ms)


def removes_group(group: ConsumerGroup, expired: list[TopicPartition]) -> bool:
    """Whether expiring `expired` leaves the group with neither members nor offsets (Kafka then
    deletes the group)."""
    return not group.has_members and len(expired) == len(group.offsets)

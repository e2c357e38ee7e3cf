"""`__consumer_offsets` records: replaying what a coordinator wrote rebuilds the same groups."""

from __future__ import annotations

import msgpack

from kraft.broker.groups.membership import ConsumerGroup, GroupConfig, HeartbeatRequest, OffsetAndMetadata
from kraft.broker.groups.records import (
    GroupsReplay, group_key, group_value, offset_key, offset_value,
)

CONFIG = GroupConfig()
TOPICS = {"a": 4}


def test_replay_restores_membership_and_offsets() -> None:
    g = ConsumerGroup("g", CONFIG)
    r1 = g.heartbeat(HeartbeatRequest("", 0, client_id="c1", subscribed_topics=("a",)), TOPICS, "m1")
    g.heartbeat(HeartbeatRequest("", 0, client_id="c2", subscribed_topic_regex="a.*", principal="User:bob"),
                TOPICS, "m2")
    g.heartbeat(HeartbeatRequest("m1", r1.member_epoch, owned=r1.assignment), TOPICS, "x")  # revoking
    g.empty_since_ms = 99  # when it was last empty: offset retention counts from it after a failover
    replay = GroupsReplay(CONFIG)
    replay.replay(offset_key("g", "a", 0), offset_value(OffsetAndMetadata(5, "meta", 123)))
    replay.replay(offset_key("g", "a", 1), offset_value(OffsetAndMetadata(7, "", 124)))
    replay.replay(offset_key("g", "a", 1), None)  # tombstone
    replay.replay(group_key("g"), group_value(g))
    restored = replay.groups["g"]
    assert group_value(restored) == group_value(g) and restored.empty_since_ms == 99
    assert restored.offsets == {("a", 0): OffsetAndMetadata(5, "meta", 123)}
    assert restored.members["m1"].pending_revocation == g.members["m1"].pending_revocation != frozenset()
    assert restored.members["m2"].principal == "User:bob"  # whose Describe rights its regex resolves with
    assert restored.state == g.state == "Reconciling"


def test_deleted_group_disappears_and_garbage_is_skipped() -> None:
    g = ConsumerGroup("g", CONFIG)
    replay = GroupsReplay(CONFIG)
    replay.replay(offset_key("g", "a", 0), offset_value(OffsetAndMetadata(5, "", 1)))
    replay.replay(group_key("g"), group_value(g))
    replay.replay(b"\xc1", b"not msgpack")
    replay.replay(None, b"x")
    replay.replay(offset_key("h", "a", 0), b"\x93\x01\x02\x03")  # wrong value shape
    replay.replay(group_key("h"), msgpack.packb({"assignor": "uniform", "group_epoch": 1, "assignment_epoch": 1,
                                               "subscribed_counts": [], "members": []}))  # a list, not a map
    assert replay.skipped == 4
    replay.replay(offset_key("g", "a", 0), None)
    replay.replay(group_key("g"), None)
    assert replay.groups == {}

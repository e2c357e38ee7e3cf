"""A heartbeat or a session timeout reads the topics its group names, never the whole image (issue
13): `TopicPartitionCounts` looks topics up by name; only a regex subscription walks them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kraft.broker.groups.topic_counts import TopicPartitionCounts
from kraft.broker.groups.membership import ConsumerGroup, GroupConfig, HeartbeatRequest


class CountingTopics:
    """An image's topics: `topic_by_name` lookups are counted, walking them is refused unless
    `walkable`."""

    def __init__(self, partitions: dict[str, int], walkable: bool = False) -> None:
        self.topics = {name: SimpleNamespace(name=name, internal=name.startswith("__"),
                                             partitions=dict.fromkeys(range(count)))
                       for name, count in partitions.items()}
        self.lookups = 0
        self.walkable = walkable
        self.by_name = self

    def topic_by_name(self, name: str) -> Any:
        self.lookups += 1
        return self.topics.get(name)

    def items(self) -> Any:
        if not self.walkable:
            raise AssertionError("the whole image was walked")
        return self.topics.items()


def image(topics: CountingTopics) -> Any:
    return SimpleNamespace(topic_by_name=topics.topic_by_name, topics=topics)


def test_a_heartbeat_looks_up_only_the_subscribed_topics() -> None:
    topics = CountingTopics({f"t{i}": 3 for i in range(100_000)} | {"__consumer_offsets": 50})
    counts = TopicPartitionCounts(image(topics))
    group = ConsumerGroup("g", GroupConfig())
    answer = group.heartbeat(HeartbeatRequest("m1", 0, subscribed_topics=("t7", "missing")),
                             counts, "m1")
    assert answer.assignment == {("t7", 0), ("t7", 1), ("t7", 2)}
    group.heartbeat(HeartbeatRequest("m1", answer.member_epoch), counts, "m1")
    group.fence_member("m1", counts)  # its session timed out
    assert not group.members
    assert 0 < topics.lookups < 20
    assert "__consumer_offsets" not in counts and "t7" in counts
    with pytest.raises(KeyError):
        counts["__consumer_offsets"]


def test_a_regex_subscription_walks_the_topic_names() -> None:
    topics = CountingTopics({"orders": 2, "payments": 1, "__consumer_offsets": 50}, walkable=True)
    counts = TopicPartitionCounts(image(topics))
    group = ConsumerGroup("g", GroupConfig())
    answer = group.heartbeat(HeartbeatRequest("m1", 0, subscribed_topic_regex="(orders|__.*)"),
                             counts, "m1")
    assert answer.assignment == {("orders", 0), ("orders", 1)}
    assert sorted(counts) == ["orders", "payments"] and len(counts) == 2

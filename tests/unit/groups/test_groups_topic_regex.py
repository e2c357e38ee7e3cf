"""Subscription regexes (issue 21): RE2, so a pattern that makes a backtracking engine explode is
matched in linear time; whole-name matches as Kafka's RE2/J `matches()`; a bad, unsupported or
too long pattern is INVALID_REGULAR_EXPRESSION; and the coordinator's resolver keeps only what the
member may Describe, matches once per (regex, image), and lets the loop run while it works."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kraft.broker.groups.errors import GroupError
from kraft.broker.groups.membership import ConsumerGroup, GroupConfig, HeartbeatRequest
from kraft.broker.groups.regex_resolver import RegexResolver
from kraft.broker.groups.topic_regex import MAX_REGEX_LENGTH, compile_regex, matching
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import Topic
from loop_turns import loop_turns


def test_a_catastrophic_pattern_is_matched_in_linear_time() -> None:
    # Python's re needs ~2**n steps here (66 s at n = 30); at n = 60 it would never finish
    assert matching("(a+)+b", ["a" * 60, "a" * 59 + "b"]) == {"a" * 59 + "b"}


def test_the_pattern_must_match_the_whole_name() -> None:
    names = ["orders", "orders-eu", "old-orders"]
    assert matching("orders", names) == {"orders"}
    assert matching("orders.*", names) == {"orders", "orders-eu"}
    assert matching(".*orders", names) == {"orders", "old-orders"}


@pytest.mark.parametrize("regex", ["(", "a{1001}", r"(a)\1", "(?=a)a", "a" * (MAX_REGEX_LENGTH + 1)])
def test_a_bad_unsupported_or_too_long_pattern_is_invalid_regular_expression(regex: str) -> None:
    with pytest.raises(GroupError) as e:
        compile_regex(regex)
    assert e.value.error_code == "INVALID_REGULAR_EXPRESSION"
    group = ConsumerGroup("g", GroupConfig())
    with pytest.raises(GroupError) as e:
        group.heartbeat(HeartbeatRequest("", 0, subscribed_topic_regex=regex), {"a": 1}, "m1")
    assert e.value.error_code == "INVALID_REGULAR_EXPRESSION"
    assert not group.members


def test_a_pattern_of_the_longest_length_is_accepted() -> None:
    assert matching("a" * MAX_REGEX_LENGTH, ["a" * MAX_REGEX_LENGTH]) == {"a" * MAX_REGEX_LENGTH}


def test_a_member_is_assigned_only_what_its_regex_resolves_to() -> None:
    group = ConsumerGroup("g", GroupConfig())
    topics = {"ledger": 2, "payroll": 1}
    answer = group.heartbeat(HeartbeatRequest("", 0, subscribed_topic_regex=".*", principal="User:alice"),
                             topics, "m1", regex_topics=lambda m: {"ledger"})
    assert answer.assignment == {("ledger", 0), ("ledger", 1)}
    assert group.members["m1"].principal == "User:alice"


def image_with(names: list[str]) -> MetadataImage:
    return apply_records(MetadataImage.EMPTY, ((i, Topic(name=name, topic_id=f"{i:032x}"))
                                               for i, name in enumerate(names)))[1]


class Authorizer:
    def __init__(self, describable: set[str]) -> None:
        self.describable = describable
        self.checks = 0

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, name: str) -> bool:
        self.checks += 1
        assert (operation, resource_type) == ("DESCRIBE", "TOPIC")
        return principal == "User:alice" and name in self.describable


async def test_the_resolver_keeps_what_the_principal_may_describe_and_caches_per_image() -> None:
    image = image_with(["ledger", "payroll", "__consumer_offsets"])
    authorizer = Authorizer({"ledger"})
    resolver = RegexResolver(authorizer)
    alice, bob = (".*", "User:alice", "h"), (".*", "User:bob", "h")
    assert await resolver.resolve(image, [alice, bob]) == {alice: {"ledger"}, bob: frozenset()}
    checks = authorizer.checks
    assert checks == 4  # two names (internal topics are never subscribed) for two principals
    assert await resolver.resolve(image, [alice]) == {alice: {"ledger"}}
    later = replace(image, offset=image.offset + 1)  # same topics and ACLs, e.g. an ISR change
    assert await resolver.resolve(later, [alice]) == {alice: {"ledger"}}
    assert authorizer.checks == checks  # a lookup
    newer = image_with(["ledger", "payroll", "audit"])
    authorizer.describable.add("audit")
    assert await resolver.resolve(newer, [alice]) == {alice: {"ledger", "audit"}}
    assert authorizer.checks == checks + 3


async def test_without_an_authorizer_every_match_counts_and_a_stored_bad_pattern_matches_nothing() -> None:
    image = image_with(["ledger", "payroll"])
    resolver = RegexResolver()
    key, bad = ("l.*", "User:x", "h"), ("(?=l)l.*", "User:x", "h")
    assert await resolver.resolve(image, [key, bad]) == {key: {"ledger"}, bad: frozenset()}


async def test_resolving_against_many_topics_lets_the_loop_run() -> None:
    image = image_with([f"t{i}" for i in range(20_000)])
    authorizer = Authorizer({f"t{i}" for i in range(0, 20_000, 2)})
    resolver = RegexResolver(authorizer)
    async with loop_turns() as turns:
        resolved = await resolver.resolve(image, [("t.*", "User:alice", "h")])
    assert len(resolved[("t.*", "User:alice", "h")]) == 10_000
    assert turns() >= 10  # matched in a thread, checked in slices: the loop went on meanwhile


async def test_the_caches_hold_a_bounded_number_of_names() -> None:
    image = image_with([f"t{i}" for i in range(100)])
    resolver = RegexResolver(max_cached_names=300)
    for i in range(20):
        await resolver.resolve(image, [(f"t.*|x{i}", "User:x", "h")])
    assert resolver._matches.names <= 150 and len(resolver._matches) <= 2

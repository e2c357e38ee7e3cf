"""The KIP-848 membership state machine: errors by name, fencing (what the coordinator's session
and rebalance timers do), and a hypothesis model of clients that act only on what the coordinator
answered (no partition is ever owned by two)."""

from __future__ import annotations

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kraft.broker.groups.membership import (
    ConsumerGroup, GroupConfig, GroupError, HeartbeatRequest,
)

CONFIG = GroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
TOPICS = {"a": 4, "b": 3}


def join(group: ConsumerGroup, member_id: str, topics=("a",), **kw):
    return group.heartbeat(HeartbeatRequest("", 0, subscribed_topics=topics, **kw), TOPICS, member_id)


def beat(group: ConsumerGroup, member_id: str, epoch: int, owned):
    return group.heartbeat(HeartbeatRequest(member_id, epoch, owned=frozenset(owned)), TOPICS, "unused")


def settle(group: ConsumerGroup, owned: dict[str, frozenset], epochs: dict[str, int]) -> None:
    """Heartbeats every member, acting on each answer, until the group is stable."""
    for _ in range(10):
        for m in sorted(group.members):
            r = beat(group, m, epochs[m], owned[m])
            owned[m], epochs[m] = r.assignment, r.member_epoch
        if group.state == "Stable":
            return
    raise AssertionError(f"group did not settle: {group.state}")


def test_first_member_gets_everything_it_subscribes_to() -> None:
    g = ConsumerGroup("g", CONFIG)
    r = join(g, "m1", topics=("a", "b"))
    assert (r.member_id, r.member_epoch) == ("m1", 2)  # join and new subscribed topics: 2 bumps
    assert r.assignment == {("a", p) for p in range(4)} | {("b", p) for p in range(3)}
    assert g.state == "Stable"


def test_partition_moves_only_after_release() -> None:
    g = ConsumerGroup("g", CONFIG)
    r1 = join(g, "m1")
    owned1 = r1.assignment
    r2 = join(g, "m2")
    assert r2.assignment == frozenset()  # m1 still holds everything
    assert g.state == "Reconciling"
    r1 = beat(g, "m1", r1.member_epoch, owned1)  # told to give two up; epoch unchanged until done
    assert len(r1.assignment) == 2 and r1.member_epoch < g.assignment_epoch
    assert beat(g, "m2", r2.member_epoch, ()).assignment == frozenset()
    r1 = beat(g, "m1", r1.member_epoch, r1.assignment)  # released
    assert r1.member_epoch == g.assignment_epoch
    r2 = beat(g, "m2", r2.member_epoch, ())
    assert len(r2.assignment) == 2 and not (r2.assignment & r1.assignment)
    assert g.state == "Stable"


def test_unknown_member_and_stale_epoch_are_rejected() -> None:
    g = ConsumerGroup("g", CONFIG)
    r = join(g, "m1")
    with pytest.raises(GroupError) as e:
        beat(g, "nobody", 1, ())
    assert e.value.error_code == "UNKNOWN_MEMBER_ID"
    with pytest.raises(GroupError) as e:
        beat(g, "m1", r.member_epoch + 5, ())
    assert e.value.error_code == "FENCED_MEMBER_EPOCH"
    with pytest.raises(GroupError) as e:
        join(g, "m2", topics=())
    assert e.value.error_code == "INVALID_REQUEST"
    with pytest.raises(GroupError) as e:
        join(g, "m2", server_assignor="roundabout")
    assert e.value.error_code == "INVALID_REQUEST"


def test_commit_validation() -> None:
    g = ConsumerGroup("g", CONFIG)
    g.validate_offset_commit("", -1)  # simple group: no members
    r = join(g, "m1")
    g.validate_offset_commit("m1", r.member_epoch)
    for member_id, epoch, code in [("", -1, "UNKNOWN_MEMBER_ID"), ("x", r.member_epoch, "UNKNOWN_MEMBER_ID"),
                                   ("m1", r.member_epoch - 1, "FENCED_MEMBER_EPOCH")]:
        with pytest.raises(GroupError) as e:
            g.validate_offset_commit(member_id, epoch)
        assert e.value.error_code == code
    join(g, "m2")  # bumps the group epoch; m1 commits with its own epoch until it reconciles
    g.validate_offset_commit("m1", r.member_epoch)


def test_fencing_removes_member_and_frees_partitions() -> None:
    g = ConsumerGroup("g", CONFIG)
    r1 = join(g, "m1")
    r2 = join(g, "m2")
    owned = {"m1": r1.assignment, "m2": r2.assignment}
    epochs = {"m1": r1.member_epoch, "m2": r2.member_epoch}
    settle(g, owned, epochs)
    g.fence_member("m1", TOPICS)  # its session timed out
    r2 = beat(g, "m2", epochs["m2"], owned["m2"])
    assert r2.assignment == {("a", p) for p in range(4)}
    with pytest.raises(GroupError) as e:
        beat(g, "m1", epochs["m1"], owned["m1"])
    assert e.value.error_code == "UNKNOWN_MEMBER_ID"


def test_leave_frees_partitions_at_once() -> None:
    g = ConsumerGroup("g", CONFIG)
    r1 = join(g, "m1")
    r2 = join(g, "m2")
    owned = {"m1": r1.assignment, "m2": r2.assignment}
    epochs = {"m1": r1.member_epoch, "m2": r2.member_epoch}
    settle(g, owned, epochs)
    assert g.heartbeat(HeartbeatRequest("m1", -1), TOPICS, "x").member_epoch == -1
    assert beat(g, "m2", epochs["m2"], owned["m2"]).assignment == {("a", p) for p in range(4)}


def test_regex_subscription_follows_new_topics() -> None:
    g = ConsumerGroup("g", CONFIG)
    r = g.heartbeat(HeartbeatRequest("", 0, subscribed_topic_regex="a|c"), TOPICS, "m1")
    assert r.assignment == {("a", p) for p in range(4)}
    r = g.heartbeat(HeartbeatRequest("m1", r.member_epoch, owned=r.assignment), {**TOPICS, "c": 1}, "x")
    assert ("c", 0) in r.assignment


class GroupModel(RuleBasedStateMachine):
    """Clients own exactly what their last answer gave them; they release by heartbeating."""

    @initialize()
    def setup(self) -> None:
        self.group = ConsumerGroup("g", CONFIG)
        self.topics = dict(TOPICS)
        self.next_id = 0
        self.owned: dict[str, frozenset] = {}
        self.epoch: dict[str, int] = {}
        self.subscription: dict[str, tuple[str, ...]] = {}

    @rule(topics=st.sampled_from([("a",), ("b",), ("a", "b")]), assignor=st.sampled_from([None, "range", "uniform"]))
    def join(self, topics, assignor) -> None:
        member_id = f"m{self.next_id}"
        self.next_id += 1
        r = self.group.heartbeat(HeartbeatRequest("", 0, subscribed_topics=topics, server_assignor=assignor),
                                 self.topics, member_id)
        self.owned[member_id], self.epoch[member_id] = r.assignment, r.member_epoch
        self.subscription[member_id] = topics

    @precondition(lambda self: self.owned)
    @rule(data=st.data(), lose_answer=st.booleans())
    def heartbeat(self, data, lose_answer) -> None:
        member_id = data.draw(st.sampled_from(sorted(self.owned)))
        try:
            r = self.group.heartbeat(HeartbeatRequest(
                member_id, self.epoch[member_id], subscribed_topics=self.subscription[member_id],
                owned=self.owned[member_id]), self.topics, "unused")
        except GroupError as e:
            assert e.error_code == "FENCED_MEMBER_EPOCH"
            # The client gives up everything and rejoins (epoch 0) with its member id.
            self.owned[member_id], self.epoch[member_id] = frozenset(), 0
            return
        if lose_answer:
            # The client never saw it: it keeps owning what it had, which must still be its own.
            assert self.owned[member_id] <= self.group.members[member_id].holds | r.assignment
            return
        self.owned[member_id], self.epoch[member_id] = r.assignment, r.member_epoch

    @precondition(lambda self: self.owned)
    @rule(data=st.data())
    def leave(self, data) -> None:
        member_id = data.draw(st.sampled_from(sorted(self.owned)))
        self.group.heartbeat(HeartbeatRequest(member_id, -1), self.topics, "unused")
        del self.owned[member_id], self.epoch[member_id]

    @precondition(lambda self: self.owned)
    @rule(data=st.data())
    def fenced(self, data) -> None:
        """Its session or rebalance timeout passed: the coordinator's timer fences it."""
        member_id = data.draw(st.sampled_from(sorted(self.owned)))
        self.group.fence_member(member_id, self.topics)
        # The client's own session expired too: it stops consuming (Kafka's poll timeout).
        del self.owned[member_id], self.epoch[member_id]

    @rule(topic=st.sampled_from(["a", "b"]))
    def add_partition(self, topic) -> None:
        self.topics[topic] += 1

    @invariant()
    def no_partition_has_two_owners(self) -> None:
        if not hasattr(self, "group"):
            return
        seen: set = set()
        for member_id, owned in self.owned.items():
            assert not (seen & owned), f"{sorted(seen & owned)} owned twice"
            seen |= owned
            # what a client owns, the coordinator knows it may hold
            assert owned <= self.group.members[member_id].holds
        self.group.check_invariants()

    @invariant()
    def members_match(self) -> None:
        if hasattr(self, "group"):
            assert set(self.group.members) == set(self.owned)


GroupModel.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestGroupModel = GroupModel.TestCase


def test_everyone_converges_to_the_target() -> None:
    g = ConsumerGroup("g", CONFIG)
    owned, epochs = {}, {}
    for i in range(5):
        r = join(g, f"m{i}", topics=("a", "b"))
        owned[r.member_id], epochs[r.member_id] = r.assignment, r.member_epoch
    settle(g, owned, epochs)
    everything = {("a", p) for p in range(4)} | {("b", p) for p in range(3)}
    assert set().union(*owned.values()) == everything
    assert max(map(len, owned.values())) - min(map(len, owned.values())) <= 1

"""The classic group protocol's state machine (`ClassicGroup`), pure: MEMBER_ID_REQUIRED, the
delayed first rebalance, the protocols' intersection and vote, the leader and what it is sent,
SyncGroup, heartbeats during a rebalance, LeaveGroup batches, members that do not rejoin, session
expiry, static membership (a rejoining instance keeps its assignment, its old member id is
fenced) and offset commit validation; a hypothesis state machine checks the invariants and that
the group's record restores the group, under any sequence of requests and timers."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kraft.broker.groups.classic import (
    COMPLETING, EMPTY, PREPARING, STABLE, ClassicConfig, ClassicGroup, JoinRequest, MemberIdRequired,
)
from kraft.broker.groups.errors import GroupError
from kraft.broker.groups.records import classic_group_value, restore_classic

CONFIG = ClassicConfig(initial_rebalance_delay_ms=3_000)
RANGE = ("range", b"r-meta")
ROUND_ROBIN = ("roundrobin", b"rr-meta")


def request(member_id: str = "", protocols=(RANGE, ROUND_ROBIN), instance: str | None = None,
            protocol_type: str = "consumer", rebalance_timeout_ms: int = 10_000) -> JoinRequest:
    return JoinRequest(member_id, instance, protocol_type, tuple(protocols), 10_000, rebalance_timeout_ms,
                       client_id="client", client_host="10.0.0.1")


def error_of(call) -> str:
    with pytest.raises(GroupError) as e:
        call()
    return e.value.error_code


def join_new(group: ClassicGroup, member_id: str, now_ms: int, **kwargs) -> object:
    """A v4+ join: MEMBER_ID_REQUIRED, then the join with the id given."""
    with pytest.raises(MemberIdRequired) as e:
        group.join(request(**kwargs), member_id, now_ms)
    assert e.value.member_id == member_id
    return group.join(request(member_id, **kwargs), "unused", now_ms)


def stable_group(*member_ids: str) -> ClassicGroup:
    """A Stable group of generation 1 whose members joined at 0; the assignment is each id."""
    group = ClassicGroup("g", CONFIG)
    for m in member_ids:
        assert join_new(group, m, 0) is None
    group.try_complete_join(CONFIG.initial_rebalance_delay_ms)
    assert group.state is COMPLETING
    for m in member_ids[1:]:
        assert group.sync(m, None, 1, "consumer", "range", {}) is None  # waits for the leader
    group.sync(member_ids[0], None, 1, "consumer", "range", {m: m.encode() for m in member_ids})
    assert group.state is STABLE
    return group


def test_a_new_member_joins_with_the_member_id_it_is_given() -> None:
    group = ClassicGroup("g", CONFIG)
    with pytest.raises(MemberIdRequired):
        group.join(request(), "m1", 0)
    assert group.pending_members == {"m1": 10_000} and group.state is EMPTY
    assert error_of(lambda: group.join(request("m9"), "x", 0)) == "UNKNOWN_MEMBER_ID"
    assert group.join(request("m1"), "x", 0) is None  # waits: the first rebalance is delayed
    assert group.state is PREPARING and list(group.members) == ["m1"] and not group.pending_members


def test_a_join_without_member_id_before_v4_joins_at_once() -> None:
    group = ClassicGroup("g", ClassicConfig(initial_rebalance_delay_ms=0))
    answer = group.join(JoinRequest("", None, "consumer", (RANGE,), 10_000, 10_000,
                                    require_known_member_id=False), "m1", 0)
    assert answer is not None and answer.member_id == "m1" and answer.generation_id == 1
    assert answer.leader_id == "m1" and answer.members[0].metadata == b"r-meta"


def test_the_first_rebalance_waits_for_members_that_keep_arriving() -> None:
    group = ClassicGroup("g", CONFIG)
    join_new(group, "m1", 0)
    assert group.join_due_ms == 3_000
    join_new(group, "m2", 2_000)
    assert group.join_due_ms == 5_000  # a new member: the delay starts again
    group.try_complete_join(4_000)
    assert group.state is PREPARING
    group.try_complete_join(5_000)
    assert group.state is COMPLETING and group.generation_id == 1 and group.leader_id == "m1"
    leader = group.join_answer("m1", None)
    follower = group.join_answer("m2", None)
    assert leader is not None and follower is not None
    assert [(m.member_id, m.metadata) for m in leader.members] == [("m1", b"r-meta"), ("m2", b"r-meta")]
    assert follower.members == () and follower.leader_id == "m1" and follower.protocol_name == "range"


def test_the_delay_never_outlasts_the_rebalance_timeout() -> None:
    group = ClassicGroup("g", CONFIG)
    for i in range(3):
        join_new(group, f"m{i}", i * 2_000, rebalance_timeout_ms=5_000)
    assert group.join_due_ms == 5_000  # not 4_000 + 3_000: the first member's rebalance timeout
    group.try_complete_join(5_000)
    assert group.state is COMPLETING and len(group.members) == 3


def test_sync_hands_the_leaders_assignment_to_every_member() -> None:
    group = stable_group("m1", "m2", "m3")
    assert group.sync_answer("m2", None, 1) == b"m2"
    assert group.sync("m3", None, 1, None, None, {}) == b"m3"  # a late sync in Stable
    assert error_of(lambda: group.sync("m3", None, 0, None, None, {})) == "ILLEGAL_GENERATION"
    assert error_of(lambda: group.sync("m3", None, 1, "connect", None, {})) == "INCONSISTENT_GROUP_PROTOCOL"
    assert error_of(lambda: group.sync("zz", None, 1, None, None, {})) == "UNKNOWN_MEMBER_ID"


def test_protocols_every_member_supports_and_the_vote() -> None:
    group = ClassicGroup("g", ClassicConfig(initial_rebalance_delay_ms=0))
    join_new(group, "m1", 0, protocols=(RANGE, ROUND_ROBIN))
    assert group.state is COMPLETING and group.protocol_name == "range"
    join_new(group, "m2", 0, protocols=(ROUND_ROBIN,))  # only roundrobin is common now
    assert group.join(request("m1"), "x", 0) is not None  # everyone rejoined: completed
    assert group.protocol_name == "roundrobin" and group.generation_id == 2
    for protocols, protocol_type in [((("sticky", b""),), "consumer"), ((RANGE,), "connect")]:
        assert error_of(lambda: group.join(request(protocols=protocols, protocol_type=protocol_type), "m3", 0)) \
            == "INCONSISTENT_GROUP_PROTOCOL"
    assert error_of(lambda: group.join(request(protocols=()), "m3", 0)) == "INCONSISTENT_GROUP_PROTOCOL"


def test_a_leaving_member_makes_the_others_rejoin() -> None:
    group = stable_group("m1", "m2", "m3")
    assert group.heartbeat("m2", None, 1) is None
    assert group.leave([("m1", None), ("zz", None)], 100) == [None, "UNKNOWN_MEMBER_ID"]
    assert group.state is PREPARING and group.leader_id == "m2"
    assert group.heartbeat("m2", None, 1) == "REBALANCE_IN_PROGRESS"
    assert error_of(lambda: group.sync_answer("m3", None, 1)) == "REBALANCE_IN_PROGRESS"
    assert group.join(request("m2"), "x", 200) is None  # m3 has not rejoined yet
    answer = group.join(request("m3"), "x", 300)
    assert answer is not None and answer.generation_id == 2 and answer.leader_id == "m2"


def test_members_that_do_not_rejoin_in_time_are_removed() -> None:
    group = stable_group("m1", "m2")
    assert group.join(request("m2"), "x", 500) is not None  # a follower, unchanged: no rebalance
    assert group.join(request("m1"), "x", 1_000) is None  # the leader: a rebalance; m2 never rejoins
    assert group.join_due_ms == 1_000 + 10_000
    group.try_complete_join(11_000)
    assert list(group.members) == ["m1"] and group.leader_id == "m1" and group.generation_id == 2
    assert error_of(lambda: group.join_answer("m2", None)) == "UNKNOWN_MEMBER_ID"


def test_a_session_expires_unless_the_member_waits_in_a_join() -> None:
    group = stable_group("m1", "m2")
    group.join(request("m1"), "x", 0)
    assert not group.expire_member("m1", 5_000)  # its JoinGroup is parked: kept
    assert group.expire_member("m2", 5_000)  # gone: the join completes without it
    assert group.state is COMPLETING and list(group.members) == ["m1"]
    assert group.expire_member("m1", 6_000)
    assert group.state is EMPTY and group.generation_id == 3 and group.leader_id is None


def test_a_static_member_rejoining_keeps_its_assignment_without_a_rebalance() -> None:
    group = ClassicGroup("g", CONFIG)
    for member_id, instance in [("m1", "i1"), ("m2", "i2")]:
        assert group.join(request(instance=instance), member_id, 0) is None  # static: no MEMBER_ID_REQUIRED
    group.try_complete_join(3_000)
    group.sync("m1", "i1", 1, None, None, {"m1": b"a1", "m2": b"a2"})
    answer = group.join(request(instance="i1"), "m1-new", 5_000)  # the leader restarted
    assert answer is not None and answer.member_id == "m1-new" and answer.generation_id == 1
    assert answer.leader_id == "m1"  # the old id: it does not compute an assignment a Stable group ignores
    assert group.state is STABLE and group.leader_id == "m1-new"
    assert group.sync("m1-new", "i1", 1, None, None, {}) == b"a1"
    for call in (lambda: group.heartbeat("m1", "i1", 1), lambda: group.sync("m1", "i1", 1, None, None, {}),
                 lambda: group.validate_offset_commit("m1", "i1", 1)):
        assert error_of(call) == "FENCED_INSTANCE_ID"
    assert group.leave([("m1", "i1")], 6_000) == ["FENCED_INSTANCE_ID"]
    assert group.leave([("", "i2")], 6_000) == [None]  # a static member leaves by its instance id
    assert group.state is PREPARING


def test_a_static_member_with_new_protocols_rebalances() -> None:
    group = ClassicGroup("g", ClassicConfig(initial_rebalance_delay_ms=0))
    group.join(request(instance="i1"), "m1", 0)
    group.sync("m1", "i1", 1, None, None, {"m1": b"a1"})
    assert group.join(request(instance="i1", protocols=(ROUND_ROBIN,)), "m1-new", 10) is not None
    assert group.generation_id == 2 and group.protocol_name == "roundrobin"


def test_offset_commits_of_a_classic_group() -> None:
    group = stable_group("m1", "m2")
    group.validate_offset_commit("m1", None, 1)
    assert error_of(lambda: group.validate_offset_commit("m1", None, 0)) == "ILLEGAL_GENERATION"
    assert error_of(lambda: group.validate_offset_commit("", None, -1)) == "UNKNOWN_MEMBER_ID"
    group.leave([("m1", None)], 0)
    group.validate_offset_commit("m2", None, 1)  # PreparingRebalance: the generation still commits
    group.join(request("m2"), "x", 0)
    assert group.state is COMPLETING and group.generation_id == 2
    assert error_of(lambda: group.validate_offset_commit("m2", None, 2)) == "REBALANCE_IN_PROGRESS"
    group.leave([("m2", None)], 0)
    assert group.state is EMPTY
    group.validate_offset_commit("", None, -1)  # admin tools commit to an empty group


def test_a_session_timeout_outside_the_brokers_bounds_is_refused() -> None:
    group = ClassicGroup("g", CONFIG)
    for timeout in (CONFIG.min_session_timeout_ms - 1, CONFIG.max_session_timeout_ms + 1):
        req = JoinRequest("", None, "consumer", (RANGE,), timeout, 10_000)
        assert error_of(lambda: group.join(req, "m1", 0)) == "INVALID_SESSION_TIMEOUT"


def test_the_group_record_restores_the_group() -> None:
    group = stable_group("m1", "m2")
    group.join(request(instance="i3"), "m3", 10)
    restored = restore_classic("g", CONFIG, msgpack.unpackb(classic_group_value(group, 5), raw=False))
    assert restored == group


MEMBERS = st.sampled_from(["m1", "m2", "m3", "m4"])
INSTANCES = st.sampled_from([None, None, "i1", "i2"])
PROTOCOLS = st.sampled_from([(RANGE, ROUND_ROBIN), (ROUND_ROBIN,), (RANGE,)])


class ClassicGroupMachine(RuleBasedStateMachine):
    """Any sequence of requests and timers keeps the invariants, and the record of the group
    restores it exactly (what a failover loads)."""

    def __init__(self) -> None:
        super().__init__()
        self.group = ClassicGroup("g", ClassicConfig(initial_rebalance_delay_ms=500))
        self.now = 0
        self.fresh = 0

    def _new_id(self) -> str:
        self.fresh += 1
        return f"n{self.fresh}"

    def _try(self, call) -> None:
        try:
            call()
        except (GroupError, MemberIdRequired):
            pass

    @rule(instance=INSTANCES, protocols=PROTOCOLS)
    def join_new(self, instance: str | None, protocols) -> None:
        self._try(lambda: self.group.join(request(instance=instance, protocols=protocols), self._new_id(), self.now))

    @rule(data=st.data(), protocols=PROTOCOLS)
    def rejoin(self, data, protocols) -> None:
        known = sorted(self.group.members) + sorted(self.group.pending_members)
        if known:
            member_id = data.draw(st.sampled_from(known))
            member = self.group.members.get(member_id)
            instance = member.group_instance_id if member is not None else None
            self._try(lambda: self.group.join(request(member_id, protocols=protocols, instance=instance), "x", self.now))

    @rule()
    def leader_syncs(self) -> None:
        leader = self.group.leader_id
        if leader is not None:
            self._try(lambda: self.group.sync(leader, None, self.group.generation_id, None, None,
                                              {m: m.encode() for m in self.group.members}))

    @rule(member_id=MEMBERS)
    def heartbeat(self, member_id: str) -> None:
        self._try(lambda: self.group.heartbeat(member_id, None, self.group.generation_id))

    @rule(data=st.data())
    def leave(self, data) -> None:
        if self.group.members:
            member_id = data.draw(st.sampled_from(sorted(self.group.members)))
            self.group.leave([(member_id, None)], self.now)

    @rule(data=st.data())
    def expire(self, data) -> None:
        known = sorted(self.group.members) + sorted(self.group.pending_members)
        if known:
            self.group.expire_member(data.draw(st.sampled_from(known)), self.now)

    @rule(ms=st.integers(0, 12_000))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.group.try_complete_join(self.now)

    @invariant()
    def consistent(self) -> None:
        self.group.check_invariants()
        value = msgpack.unpackb(classic_group_value(self.group, None), raw=False)
        assert restore_classic("g", self.group.config, value) == self.group
        if self.group.state in (COMPLETING, STABLE):
            assert self.group.protocol_name in self.group.candidate_protocols()


ClassicGroupMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_classic_group_machine = ClassicGroupMachine.TestCase


def consumer_metadata(*topics: str) -> bytes:
    """A consumer protocol subscription (version 0) as clients send it in JoinGroup."""
    import io

    from kio.schema.consumer_protocol_subscription.v0 import ConsumerProtocolSubscription
    from kio.serial import entity_writer

    buffer = io.BytesIO(b"\x00\x00")
    buffer.seek(2)
    entity_writer(ConsumerProtocolSubscription)(buffer, ConsumerProtocolSubscription(topics=topics, user_data=None))
    return buffer.getvalue()


def test_offsets_of_a_classic_groups_subscribed_topics_do_not_expire_while_it_has_members() -> None:
    from kraft.broker.groups.expiration import expired_offsets
    from kraft.broker.groups.membership import ConsumerGroup, GroupConfig, OffsetAndMetadata

    def group(protocol_type: str, metadata: bytes) -> ConsumerGroup:
        g = ConsumerGroup("g", GroupConfig())
        g.classic = ClassicGroup("g", ClassicConfig(initial_rebalance_delay_ms=0))
        g.classic.join(request(protocols=(("range", metadata),), protocol_type=protocol_type, instance="i"), "m1", 0)
        g.offsets = {tp: OffsetAndMetadata(1, "", 0) for tp in (("a", 0), ("b", 0))}
        return g

    assert expired_offsets(group("consumer", consumer_metadata("a")), 100, 50) == [("b", 0)]
    assert expired_offsets(group("connect", b"opaque"), 100, 50) == []  # not the consumer protocol: kept
    assert expired_offsets(group("consumer", b"garbage"), 100, 50) == []  # unreadable: kept
    emptied = group("consumer", consumer_metadata("a"))
    assert emptied.classic is not None
    emptied.classic.leave([("m1", "i")], 70)
    emptied.empty_since_ms = 70
    assert expired_offsets(emptied, 100, 50) == [] and expired_offsets(emptied, 120, 50) == [("a", 0), ("b", 0)]

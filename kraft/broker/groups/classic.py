"""The classic consumer group protocol (Kafka's `ClassicGroup` and the classic half of its group
coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup), sans I/O: requests in, the group's new
state and the answers out. Time is passed in (`now_ms`); the shard turns `join_due_ms` and the
members' sessions into the runtime's timers.

States, with Kafka's transitions (`_TRANSITIONS` is asserted on every change):
- Empty: no members (new, or everyone left). A first join starts the *delayed first rebalance*:
  the join completes `initial_rebalance_delay_ms` after the last new member arrived, at most the
  rebalance timeout after it began (Kafka's `InitialDelayedJoin`), so a group starting together
  makes one generation instead of one per member.
- PreparingRebalance: members (re)join; it completes when every known member has rejoined (and no
  member id handed out with MEMBER_ID_REQUIRED is still outstanding), or at the rebalance timeout,
  when those that did not rejoin are removed. Heartbeats answer REBALANCE_IN_PROGRESS.
- CompletingRebalance: the generation is bumped, the protocol chosen by the members' votes, the
  leader named; the joins are answered (the leader gets every member's metadata); the leader's
  SyncGroup brings the assignment.
- Stable: the assignment is stored (in the group's record) and handed to each member's SyncGroup.
- Dead: a group that does not exist (what DescribeGroups answers for one).

A waiting JoinGroup or SyncGroup is answered from the committed state (`join_answer`,
`sync_answer`): whichever request or timer moves the group on, the waiters see it on replay.

Static membership (KIP-345): a member with a `group_instance_id` rejoining without a member id
takes over its instance's membership under a new member id and keeps its assignment; in a Stable
group whose protocol does not change this needs no rebalance. A request naming the instance with
another member id is FENCED_INSTANCE_ID.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kraft.broker.groups.consumer_protocol import CONSUMER_PROTOCOL_TYPE, assigned_partitions
from kraft.broker.groups.consumer_protocol import subscribed_topics as subscription_topics
from kraft.broker.groups.errors import GroupError


class ClassicState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = ClassicState.EMPTY
PREPARING = ClassicState.PREPARING_REBALANCE
COMPLETING = ClassicState.COMPLETING_REBALANCE
STABLE = ClassicState.STABLE
DEAD = ClassicState.DEAD

# Kafka's GroupState.validPreviousStates, read forwards.
_TRANSITIONS: dict[ClassicState, frozenset[ClassicState]] = {
    EMPTY: frozenset({PREPARING, DEAD}),
    PREPARING: frozenset({PREPARING, COMPLETING, EMPTY, DEAD}),
    COMPLETING: frozenset({PREPARING, STABLE, DEAD}),
    STABLE: frozenset({PREPARING, DEAD}),
    DEAD: frozenset({DEAD}),
}


@dataclass(frozen=True)
class ClassicConfig:
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size


Protocols = tuple[tuple[str, bytes], ...]
"""A member's protocols (assignor names) in its order of preference, with its metadata for each."""


@dataclass(frozen=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+


@dataclass
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: bool = False  # joined in the current rebalance, its JoinGroup not yet answered

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    """Kafka's JoinGroupResponse; `members` only for the leader."""

    member_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str
    members: tuple[JoinedMember, ...] = ()


class MemberIdRequired(Exception):
    """JoinGroup v4+ without a member id: join again with this one (MEMBER_ID_REQUIRED)."""

    def __init__(self, member_id: str) -> None:
        super().__init__(f"join again with member id {member_id!r}")
        self.member_id = member_id


WAIT = None  # a join or sync answered later, from the committed state


@dataclass
class ClassicGroup:
    group_id: str
    config: ClassicConfig = ClassicConfig()
    state: ClassicState = EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    # ids handed out with MEMBER_ID_REQUIRED, with the session timeout they expire after
    pending_members: dict[str, int] = field(default_factory=dict)
    rebalance_deadline_ms: int | None = None  # PreparingRebalance ends by then at the latest
    delay_until_ms: int | None = None  # the delayed first rebalance: not before then

    # -- views ---------------------------------------------------------------------------------

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return next((m.member_id for m in self.members.values() if m.group_instance_id == group_instance_id), None)

    @property
    def join_due_ms(self) -> int | None:
        """When the rebalance in progress completes unless every member rejoins first."""
        if self.state is not PREPARING:
            return None
        assert self.rebalance_deadline_ms is not None
        if self.delay_until_ms is not None:
            return min(self.delay_until_ms, self.rebalance_deadline_ms)
        return self.rebalance_deadline_ms

    def subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, from their consumer protocol metadata; None for
        another protocol type or metadata that does not parse."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        out: set[str] = set()
        for m in self.members.values():
            topics = subscription_topics(m.protocols[0][1]) if m.protocols else None
            if topics is None:
                return None
            out.update(topics)
        return frozenset(out)

    def member_topics(self, member: ClassicMember) -> tuple[str, ...]:
        """The topics of a member's consumer protocol subscription (none if it has none)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or not member.protocols:
            return ()
        return subscription_topics(member.protocols[0][1]) or ()

    def assigned(self, member: ClassicMember) -> frozenset[tuple[str, int]]:
        """The member's partitions, from its consumer protocol assignment."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return frozenset()
        return assigned_partitions(member.assignment)

    def candidate_protocols(self, members: list[ClassicMember] | None = None) -> set[str]:
        """The protocols every member supports."""
        members = list(self.members.values()) if members is None else members
        if not members:
            return set()
        out = set(members[0].protocol_names)
        for m in members[1:]:
            out &= set(m.protocol_names)
        return out

    def select_protocol(self) -> str:
        """Each member votes for the first protocol it lists that every member supports; the most
        votes wins (ties: the name first in order, so every replica picks the same)."""
        candidates = self.candidate_protocols()
        assert candidates, f"group {self.group_id}: no protocol every member supports"
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(name for name in m.protocol_names if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return min(votes, key=lambda name: (-votes[name], name))

    def supports(self, protocol_type: str, protocols: Protocols, member_id: str | None = None) -> bool:
        """Kafka's supportsProtocols: an empty group takes any; otherwise the protocol type must
        match and one protocol must be supported by every other member too."""
        others = [m for m in self.members.values() if m.member_id != member_id]
        if not protocol_type or not protocols:
            return False
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols(others) & {name for name, _ in protocols})

    def check_invariants(self) -> None:
        assert self.members or self.state in (EMPTY, PREPARING, DEAD), f"{self.state.value} without members"
        assert not self.members or self.state is not EMPTY
        assert (self.leader_id is None) == (not self.members), (self.leader_id, list(self.members))
        assert self.leader_id is None or self.leader_id in self.members
        instances = [m.group_instance_id for m in self.members.values() if m.group_instance_id is not None]
        assert len(instances) == len(set(instances)), f"an instance with two members: {instances}"
        assert not (self.pending_members.keys() & self.members.keys())
        assert (self.state is PREPARING) == (self.rebalance_deadline_ms is not None)
        assert self.delay_until_ms is None or self.state is PREPARING
        assert self.protocol_name is not None or self.state not in (COMPLETING, STABLE)

    # -- requests ------------------------------------------------------------------------------

    def join(self, req: JoinRequest, new_member_id: str, now_ms: int) -> JoinResult | None:
        """Kafka's JoinGroup: the answer now, or WAIT (answered by `join_answer` once the join
        completes). Raises GroupError, or MemberIdRequired."""
        c = self.config
        if not c.min_session_timeout_ms <= req.session_timeout_ms <= c.max_session_timeout_ms:
            raise GroupError("INVALID_SESSION_TIMEOUT", f"session timeout {req.session_timeout_ms} ms is outside "
                             f"[{c.min_session_timeout_ms}, {c.max_session_timeout_ms}] ms")
        if not req.member_id:
            return self._join_unknown(req, new_member_id, now_ms)
        return self._join_known(req, now_ms)

    def _join_unknown(self, req: JoinRequest, new_member_id: str, now_ms: int) -> JoinResult | None:
        if not self.supports(req.protocol_type, req.protocols):
            raise self._inconsistent(req)
        if self.static_member_id(req.group_instance_id) is not None:
            return self._static_rejoin(req, new_member_id, now_ms)
        if len(self.members) + len(self.pending_members) >= self.config.max_size:
            raise GroupError("GROUP_MAX_SIZE_REACHED", f"group {self.group_id!r} has reached its maximum "
                             f"size of {self.config.max_size} members")
        if req.group_instance_id is None and req.require_known_member_id:
            self.pending_members[new_member_id] = req.session_timeout_ms
            raise MemberIdRequired(new_member_id)
        return self._add_and_rebalance(req, new_member_id, now_ms)

    def _join_known(self, req: JoinRequest, now_ms: int) -> JoinResult | None:
        if req.member_id in self.pending_members:
            if not self.supports(req.protocol_type, req.protocols):
                raise self._inconsistent(req)
            del self.pending_members[req.member_id]
            return self._add_and_rebalance(req, req.member_id, now_ms)
        member = self._member(req.member_id, req.group_instance_id)
        if self.state in (EMPTY, DEAD):
            raise self._unknown(req.member_id)
        if not self.supports(req.protocol_type, req.protocols, req.member_id):
            raise self._inconsistent(req)
        changed = member.protocols != req.protocols
        if self.state is PREPARING:
            self._update(member, req)
            self.try_complete_join(now_ms)
            return self.join_answer(member.member_id, member.group_instance_id)
        if self.state is COMPLETING and not changed:
            return self._result(member.member_id)
        if self.state is STABLE and not changed and member.member_id != self.leader_id:
            return self._result(member.member_id)
        # The leader rejoining a Stable group, or new protocols: a new generation.
        self._update(member, req)
        self._prepare_rebalance(now_ms)
        self.try_complete_join(now_ms)
        return self.join_answer(member.member_id, member.group_instance_id)

    def _static_rejoin(self, req: JoinRequest, new_member_id: str, now_ms: int) -> JoinResult | None:
        """A static member back under a new member id: it replaces its instance's old id (whose
        requests are fenced from now on) and keeps its assignment."""
        old_id = self.static_member_id(req.group_instance_id)
        assert old_id is not None
        old_leader = self.leader_id
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        self._update(member, req, awaiting=False)
        if self.state is STABLE and self.select_protocol() == self.protocol_name:
            # No rebalance: it syncs and gets its old assignment. The old leader id is answered so
            # that a returning leader does not compute an assignment a Stable group would ignore.
            assert old_leader is not None
            return JoinResult(new_member_id, self.generation_id, self.protocol_type, self.protocol_name, old_leader)
        member.awaiting_join = True
        if self.state is not PREPARING:
            self._prepare_rebalance(now_ms)
        self.try_complete_join(now_ms)
        return self.join_answer(new_member_id, member.group_instance_id)

    def sync(self, member_id: str, group_instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> bytes | None:
        """Kafka's SyncGroup: the member's assignment now, or WAIT (a follower before the
        leader's sync). The leader's `assignments` become the group's (members it leaves out
        get an empty one)."""
        member = self._member(member_id, group_instance_id)
        if self.state in (EMPTY, DEAD):
            raise self._unknown(member_id)
        if generation_id != self.generation_id:
            raise GroupError("ILLEGAL_GENERATION", f"generation {generation_id} is not group "
                             f"{self.group_id!r}'s generation {self.generation_id}")
        if (protocol_type is not None and protocol_type != self.protocol_type) or \
                (protocol_name is not None and protocol_name != self.protocol_name):
            raise GroupError("INCONSISTENT_GROUP_PROTOCOL", f"group {self.group_id!r} uses protocol "
                             f"{self.protocol_type}/{self.protocol_name}, not {protocol_type}/{protocol_name}")
        if self.state is PREPARING:
            raise self._rebalancing()
        if self.state is COMPLETING and member_id == self.leader_id:
            for m in self.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self._transition(STABLE)
        return self.sync_answer(member_id, group_instance_id, generation_id)

    def heartbeat(self, member_id: str, group_instance_id: str | None, generation_id: int) -> str | None:
        """Kafka's Heartbeat: None, or REBALANCE_IN_PROGRESS (the session is renewed all the
        same). Raises for an unknown or fenced member or another generation."""
        if self.state in (EMPTY, DEAD):
            raise self._unknown(member_id)
        self._member(member_id, group_instance_id)
        if generation_id != self.generation_id:
            raise GroupError("ILLEGAL_GENERATION", f"generation {generation_id} is not group "
                             f"{self.group_id!r}'s generation {self.generation_id}")
        return "REBALANCE_IN_PROGRESS" if self.state is PREPARING else None

    def leave(self, members: list[tuple[str, str | None]], now_ms: int) -> list[str | None]:
        """Kafka's LeaveGroup (v3+: a batch of (member id, group instance id)): each member's
        error, None when it left. A static member may leave by its instance id alone."""
        errors: list[str | None] = []
        for member_id, instance_id in members:
            try:
                if instance_id is not None:
                    registered = self.static_member_id(instance_id)
                    if registered is None:
                        raise self._unknown(member_id or instance_id)
                    self._member(member_id or registered, instance_id)
                    self.remove_member(registered, now_ms)
                elif member_id in self.pending_members:
                    del self.pending_members[member_id]
                    self.try_complete_join(now_ms)
                else:
                    self._member(member_id, None)
                    self.remove_member(member_id, now_ms)
                errors.append(None)
            except GroupError as e:
                errors.append(e.error_code)
        return errors

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_id: int) -> None:
        """Kafka's ClassicGroup.validateOffsetCommit: a negative generation commits only to an
        empty group (admin tools, consumers without a group); otherwise the member of this
        generation, not during CompletingRebalance."""
        if generation_id < 0 and self.state is EMPTY:
            return
        if self.state is COMPLETING:
            raise self._rebalancing()
        self._member(member_id, group_instance_id)
        if generation_id != self.generation_id:
            raise GroupError("ILLEGAL_GENERATION", f"generation {generation_id} is not group "
                             f"{self.group_id!r}'s generation {self.generation_id}")

    # -- timers --------------------------------------------------------------------------------

    def expire_member(self, member_id: str, now_ms: int) -> bool:
        """A session timed out: the member (or id handed out and never used) is removed, unless
        it waits in a join (the rebalance timeout decides then). Whether it was removed."""
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self.try_complete_join(now_ms)
            return True
        member = self.members.get(member_id)
        if member is None or (self.state is PREPARING and member.awaiting_join):
            return False
        self.remove_member(member_id, now_ms)
        return True

    def try_complete_join(self, now_ms: int) -> None:
        """Completes the join once every member rejoined (none of the delayed first rebalance
        left), or when it is due."""
        if self.state is not PREPARING:
            return
        due = self.join_due_ms
        assert due is not None
        everyone = all(m.awaiting_join for m in self.members.values()) and not self.pending_members
        if now_ms >= due or (everyone and self.delay_until_ms is None):
            self._complete_join()

    def _complete_join(self) -> None:
        """Kafka's onCompleteJoin: members that did not rejoin are removed; the next generation
        (Empty if nobody is left)."""
        for member_id in [m.member_id for m in self.members.values() if not m.awaiting_join]:
            self._remove(member_id)
        self.rebalance_deadline_ms = self.delay_until_ms = None
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self._transition(EMPTY)
            return
        self.protocol_name = self.select_protocol()
        for m in self.members.values():
            m.awaiting_join = False
            m.assignment = b""
        self._transition(COMPLETING)

    # -- answers from the committed state ------------------------------------------------------

    def join_answer(self, member_id: str, group_instance_id: str | None) -> JoinResult | None:
        """A waiting JoinGroup's answer: WAIT while the group prepares its rebalance."""
        self._member(member_id, group_instance_id)
        if self.state is PREPARING:
            return WAIT
        return self._result(member_id)

    def sync_answer(self, member_id: str, group_instance_id: str | None, generation_id: int) -> bytes | None:
        """A waiting SyncGroup's answer: WAIT until the leader's assignment is stored;
        REBALANCE_IN_PROGRESS if a new rebalance began meanwhile."""
        member = self._member(member_id, group_instance_id)
        if self.state is PREPARING:
            raise self._rebalancing()
        if generation_id != self.generation_id:
            raise GroupError("ILLEGAL_GENERATION", f"generation {generation_id} is not group "
                             f"{self.group_id!r}'s generation {self.generation_id}")
        if self.state is COMPLETING:
            return WAIT
        return member.assignment

    # -- membership ----------------------------------------------------------------------------

    def remove_member(self, member_id: str, now_ms: int) -> None:
        """A member left or expired: the others rebalance."""
        self._remove(member_id)
        if self.state in (STABLE, COMPLETING):
            self._prepare_rebalance(now_ms)
        self.try_complete_join(now_ms)

    def _remove(self, member_id: str) -> None:
        del self.members[member_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def _add_and_rebalance(self, req: JoinRequest, member_id: str, now_ms: int) -> JoinResult | None:
        member = ClassicMember(member_id, req.group_instance_id, req.client_id, req.client_host,
                               req.session_timeout_ms, req.rebalance_timeout_ms, req.protocols, awaiting_join=True)
        self.members[member_id] = member
        if self.leader_id is None:
            self.leader_id = member_id
        if not self.protocol_type:
            self.protocol_type = req.protocol_type
        if self.state is PREPARING and self.delay_until_ms is not None:
            self.delay_until_ms = now_ms + self.config.initial_rebalance_delay_ms  # a new member: wait on
        self._prepare_rebalance(now_ms)
        self.try_complete_join(now_ms)
        return self.join_answer(member_id, req.group_instance_id)

    def _update(self, member: ClassicMember, req: JoinRequest, awaiting: bool = True) -> None:
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.awaiting_join = awaiting or member.awaiting_join

    def _prepare_rebalance(self, now_ms: int) -> None:
        """Kafka's prepareRebalance; from Empty with the first rebalance delayed. The deadline is
        the longest rebalance timeout of the members."""
        if self.state is PREPARING:
            return  # the deadline set when it began holds
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        if self.state is EMPTY and self.config.initial_rebalance_delay_ms > 0:
            self.delay_until_ms = now_ms + self.config.initial_rebalance_delay_ms
        if self.state is COMPLETING:
            for m in self.members.values():
                m.assignment = b""  # Kafka's resetAndPropagateAssignmentError
        self.rebalance_deadline_ms = now_ms + timeout
        self._transition(PREPARING)

    def _transition(self, target: ClassicState) -> None:
        assert target in _TRANSITIONS[self.state], f"group {self.group_id}: {self.state.value} -> {target.value}"
        self.state = target

    # -- errors --------------------------------------------------------------------------------

    def _member(self, member_id: str, group_instance_id: str | None) -> ClassicMember:
        """The member, FENCED_INSTANCE_ID if its instance has another member id now, or
        UNKNOWN_MEMBER_ID."""
        registered = self.static_member_id(group_instance_id)
        if registered is not None and registered != member_id:
            raise GroupError("FENCED_INSTANCE_ID", f"instance {group_instance_id!r} of group {self.group_id!r} "
                             f"is member {registered!r} now, not {member_id!r}")
        member = self.members.get(member_id)
        if member is None:
            raise self._unknown(member_id)
        return member

    def _result(self, member_id: str) -> JoinResult:
        assert self.leader_id is not None
        members: tuple[JoinedMember, ...] = ()
        if member_id == self.leader_id:
            members = tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                            for m in self.members.values())
        return JoinResult(member_id, self.generation_id, self.protocol_type, self.protocol_name, self.leader_id, members)

    def _unknown(self, member_id: str) -> GroupError:
        return GroupError("UNKNOWN_MEMBER_ID", f"member {member_id!r} is not in group {self.group_id!r}")

    def _rebalancing(self) -> GroupError:
        return GroupError("REBALANCE_IN_PROGRESS", f"group {self.group_id!r} is rebalancing: join again")

    def _inconsistent(self, req: JoinRequest) -> GroupError:
        names = ", ".join(name for name, _ in req.protocols)
        return GroupError("INCONSISTENT_GROUP_PROTOCOL", f"group {self.group_id!r} uses protocol type "
                          f"{self.protocol_type!r} with {sorted(self.candidate_protocols())}; the member "
                          f"asked for {req.protocol_type!r} with [{names}]")


def copy_group(group: ClassicGroup) -> ClassicGroup:
    """A copy a handler may change (members are mutable)."""
    return replace(group, members={k: replace(m) for k, m in group.members.items()},
                   pending_members=dict(group.pending_members))

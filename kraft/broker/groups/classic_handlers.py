"""The classic group protocol's handlers of a `GroupShard` (Kafka's GroupMetadataManager for
classic groups): JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the timers of a classic
group (each member's session, and the completion of a join).

As every shard handler, they change nothing: a classic group is copied from the committed state
(`copy_group`), the pure `ClassicGroup` changes the copy, and its record (the whole group,
`classic_group_value`) is the result; the state changes when the runtime replays it. A JoinGroup
or SyncGroup that must wait for other members answers WAIT; the coordinator then answers it from
the committed state once a replay moves the group on.

A group id names one group: one with KIP-848 members refuses classic requests, and a classic
group with members refuses KIP-848 heartbeats (INCONSISTENT_GROUP_PROTOCOL); an empty group
(offsets only, or no members left) changes protocol with its next join.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Iterable

from kraft.errors import KraftError
from kraft.broker.groups.classic import (
    EMPTY, PREPARING, ClassicGroup, JoinRequest, JoinResult, MemberIdRequired, copy_group,
)
from kraft.broker.groups.errors import GroupError
from kraft.broker.groups.membership import ConsumerGroup, GroupConfig
from kraft.broker.groups.records import classic_group_value, group_key
from kraft.coordinator.result import CancelTimer, CoordinatorResult, Record, ScheduleTimer, TimerChange

log = logging.getLogger("kraft.groups")

CLASSIC_SESSION = "classic-session"
CLASSIC_JOIN = "classic-join"


@dataclass(frozen=True)
class JoinOutcome:
    """A JoinGroup's answer: `result` now, or None to wait for the join to complete (the member
    is `member_id`); `member_id_required`: the answer is MEMBER_ID_REQUIRED with `member_id`."""

    member_id: str
    result: JoinResult | None
    member_id_required: bool = False


def inconsistent_protocol(group_id: str, using: str) -> KraftError:
    return KraftError("INCONSISTENT_GROUP_PROTOCOL", f"group {group_id!r} has members that use the "
                      f"{using} protocol: a group cannot mix the classic and the consumer (KIP-848) protocols")


class ClassicHandlers:
    """Mixed into `GroupShard`."""

    groups: dict[str, ConsumerGroup]
    config: GroupConfig

    # -- requests -----------------------------------------------------------------------------

    def classic_join(self, group_id: str, req: JoinRequest, new_member_id: str,
                     now_ms: int) -> CoordinatorResult[JoinOutcome]:
        current, before, group = self._classic_copy(group_id, create=True)
        try:
            result = group.join(req, new_member_id, now_ms)
        except MemberIdRequired as e:
            outcome = JoinOutcome(e.member_id, None, member_id_required=True)
            return self._classic_result(group_id, current, before, group, now_ms, outcome, (e.member_id,))
        except GroupError as e:
            raise KraftError(e.error_code, e.message) from None
        member_id = req.member_id or group.static_member_id(req.group_instance_id) or new_member_id
        return self._classic_result(group_id, current, before, group, now_ms, JoinOutcome(member_id, result),
                                    (member_id,))

    def classic_sync(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                     protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
                     now_ms: int) -> CoordinatorResult[bytes | None]:
        """The member's assignment, or None to wait for the leader's."""
        current, before, group = self._classic_copy(group_id, create=False)
        try:
            assignment = group.sync(member_id, group_instance_id, generation_id, protocol_type, protocol_name,
                                    assignments)
        except GroupError as e:
            raise KraftError(e.error_code, e.message) from None
        return self._classic_result(group_id, current, before, group, now_ms, assignment, (member_id,))

    def classic_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                          generation_id: int, now_ms: int) -> CoordinatorResult[str | None]:
        """None, or REBALANCE_IN_PROGRESS; the member's session is renewed either way."""
        current, before, group = self._classic_copy(group_id, create=False)
        try:
            error = group.heartbeat(member_id, group_instance_id, generation_id)
        except GroupError as e:
            raise KraftError(e.error_code, e.message) from None
        return self._classic_result(group_id, current, before, group, now_ms, error, (member_id,))

    def classic_leave(self, group_id: str, members: list[tuple[str, str | None]],
                      now_ms: int) -> CoordinatorResult[list[str | None]]:
        """Each member's error (None: it left). Kafka answers UNKNOWN_MEMBER_ID for each member
        of a group that does not exist."""
        committed = self.groups.get(group_id)
        if committed is None or committed.classic is None:
            if committed is not None and committed.has_members:
                raise inconsistent_protocol(group_id, "consumer")
            return CoordinatorResult((), ["UNKNOWN_MEMBER_ID"] * len(members))
        current, before, group = self._classic_copy(group_id, create=False)
        errors = group.leave(members, now_ms)
        for (member_id, instance_id), error in zip(members, errors):
            if error is None:
                log.info("group %s: member %s left", group_id, member_id or instance_id)
        return self._classic_result(group_id, current, before, group, now_ms, errors, ())

    def classic_validate_commit(self, group: ConsumerGroup, member_id: str, group_instance_id: str | None,
                                generation_id: int) -> None:
        assert group.classic is not None
        try:
            group.classic.validate_offset_commit(member_id, group_instance_id, generation_id)
        except GroupError as e:
            raise KraftError(e.error_code, e.message) from None

    # -- timers -------------------------------------------------------------------------------

    def classic_expire(self, now_ms: int, *, group_id: str, member_id: str) -> CoordinatorResult[None]:
        """A member's session timer: it is removed (one waiting in a join is kept until the join
        completes)."""
        committed = self.groups.get(group_id)
        classic = committed.classic if committed is not None else None
        if classic is None or (member_id not in classic.members and member_id not in classic.pending_members):
            return CoordinatorResult((), None)
        current, before, group = self._classic_copy(group_id, create=False)
        if not group.expire_member(member_id, now_ms):
            return CoordinatorResult((), None, (self._classic_session_timer(group_id, group, member_id, now_ms),))
        log.info("group %s: removed %s after session timeout", group_id, member_id)
        return self._classic_result(group_id, current, before, group, now_ms, None, ())

    def classic_complete_join(self, now_ms: int, *, group_id: str) -> CoordinatorResult[None]:
        """The join timer: the rebalance completes with the members that rejoined."""
        committed = self.groups.get(group_id)
        if committed is None or committed.classic is None or committed.classic.state is not PREPARING:
            return CoordinatorResult((), None)
        current, before, group = self._classic_copy(group_id, create=False)
        group.try_complete_join(now_ms)
        if group.state is PREPARING:  # the timer fired a little early, or the delay grew: again
            return CoordinatorResult((), None, (self._classic_join_timer(group_id, group),))
        return self._classic_result(group_id, current, before, group, now_ms, None, ())

    def classic_timers_on_load(self, now_ms: int) -> list[TimerChange]:
        """After a load: a fresh session for every member, and each rebalance's completion."""
        timers: list[TimerChange] = []
        for group_id, g in self.groups.items():
            if g.classic is None:
                continue
            for member_id in (*g.classic.members, *g.classic.pending_members):
                timers.append(self._classic_session_timer(group_id, g.classic, member_id, now_ms))
            if g.classic.state is PREPARING:
                timers.append(self._classic_join_timer(group_id, g.classic))
        return timers

    # -- helpers ------------------------------------------------------------------------------

    def _classic_copy(self, group_id: str, create: bool) -> tuple[ConsumerGroup | None, bytes | None, ClassicGroup]:
        """The committed group, its classic record value (None if it is not classic yet), and a
        classic group to change."""
        current = self.groups.get(group_id)
        if current is not None and current.members:
            raise inconsistent_protocol(group_id, "consumer")
        if current is not None and current.classic is not None:
            return current, classic_group_value(current.classic, current.empty_since_ms), copy_group(current.classic)
        if not create:
            raise KraftError("UNKNOWN_MEMBER_ID", f"group {group_id!r} has no classic members")
        return current, None, ClassicGroup(group_id, self.config.classic)

    def _classic_result(self, group_id: str, current: ConsumerGroup | None, before: bytes | None,
                        group: ClassicGroup, now_ms: int, response: object,
                        renew: Iterable[str]) -> CoordinatorResult:
        group.check_invariants()
        empty_since = current.empty_since_ms if current is not None else None
        was_active = current is not None and current.has_members
        if was_active and group.state is EMPTY and not group.pending_members:
            empty_since = now_ms  # its offsets' retention counts from here
        after = classic_group_value(group, empty_since)
        records: tuple[Record, ...] = ((group_key(group_id), after),) if after != before else ()
        previous = current.classic if current is not None else None
        return CoordinatorResult(records, response, self._classic_timers(group_id, previous, group, renew, now_ms))

    def _classic_timers(self, group_id: str, before: ClassicGroup | None, after: ClassicGroup,
                        renew: Iterable[str], now_ms: int) -> tuple[TimerChange, ...]:
        """Sessions: a member that made a request, a new one, and every member when a join
        completes (Kafka's completeAndScheduleNextHeartbeatExpiration) start a session; one
        gone loses it. The join timer follows the rebalance's due time."""
        old = set() if before is None else before.members.keys() | before.pending_members.keys()
        new = after.members.keys() | after.pending_members.keys()
        changes: list[TimerChange] = [CancelTimer((CLASSIC_SESSION, group_id, m)) for m in sorted(old - new)]
        starting = set(renew) | (new - old)
        if before is not None and before.state is PREPARING and after.state is not PREPARING:
            starting |= new
        changes += [self._classic_session_timer(group_id, after, m, now_ms) for m in sorted(starting & new)]
        due_before = before.join_due_ms if before is not None else None
        if after.join_due_ms != due_before:
            changes.append(self._classic_join_timer(group_id, after) if after.join_due_ms is not None
                           else CancelTimer((CLASSIC_JOIN, group_id)))
        return tuple(changes)

    @staticmethod
    def _classic_session_timer(group_id: str, group: ClassicGroup, member_id: str, now_ms: int) -> ScheduleTimer:
        member = group.members.get(member_id)
        timeout = member.session_timeout_ms if member is not None else group.pending_members[member_id]
        return ScheduleTimer((CLASSIC_SESSION, group_id, member_id), now_ms + timeout,
                             functools.partial(ClassicHandlers.classic_expire, group_id=group_id, member_id=member_id))

    @staticmethod
    def _classic_join_timer(group_id: str, group: ClassicGroup) -> ScheduleTimer:
        due = group.join_due_ms
        assert due is not None
        return ScheduleTimer((CLASSIC_JOIN, group_id), due,
                             functools.partial(ClassicHandlers.classic_complete_join, group_id=group_id))

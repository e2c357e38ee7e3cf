"""GroupShard: the state machine of one `__consumer_offsets` partition on the coordinator runtime
(Kafka's `GroupCoordinatorShard`): the groups its records fold into (`GroupsReplay`), and the
handlers that answer requests with the records to append.

A handler reads the committed state and changes nothing: a membership change runs on a group
rebuilt from its metadata record (`group_from_value`), and its result carries the new record;
the state changes when the runtime replays that record, exactly as a load after failover does.
What a handler needs of the world (the metadata image, what the members' regexes resolve to)
comes from the `GroupEnvironment` when it runs.

Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) have their handlers and timers in
`classic_handlers`; a replayed group record tells the environment (`group_changed`), which
answers the requests that wait for that group, and an unload tells it to fail them.

Timers (the runtime runs them as handlers): a member's session (`group.consumer.session.timeout
.ms` after its last heartbeat) and its rebalance timeout (from when it is asked to revoke until it
did) fence it; the offsets expiry check runs every `offsets.retention.check.interval.ms`. A load
gives every member a fresh session, as Kafka's coordinator does after failover.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Iterable, Protocol, TypeVar

from kraft.broker.groups.classic_handlers import ClassicHandlers, inconsistent_protocol
from kraft.broker.groups.errors import GroupError
from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.broker.groups.expiration import expired_offsets, removes_group
from kraft.broker.groups.membership import (
    LEAVE_EPOCH, ConsumerGroup, GroupConfig, HeartbeatRequest, HeartbeatResponse, OffsetAndMetadata,
    RegexTopics,
)
from kraft.broker.groups.records import (
    GroupsReplay, group_from_value, group_key, group_value, offset_key, offset_value,
)
from kraft.broker.groups.topic_counts import TopicPartitionCounts
from kraft.coordinator.result import (
    CancelTimer, CoordinatorRecord, CoordinatorResult, EndTransaction, Record, ScheduleTimer, TimerChange,
    TransactionalProducer,
)
from kraft.errors import KraftError
from kraft.metadata.image import MetadataImage
from kraft.server.groups import DeletedOffset

log = logging.getLogger("kraft.groups")

SESSION = "session"
REVOCATION = "revocation"
OFFSETS_EXPIRY = ("offsets-expiry",)

TopicPartition = tuple[str, int]
T = TypeVar("T")


class GroupEnvironment(Protocol):
    """The world as a handler sees it when it runs."""

    @property
    def image(self) -> MetadataImage: ...

    def regex_topics(self, image: MetadataImage) -> RegexTopics:
        """What the members' regexes resolve to in `image`; raises `Unresolved` for one that
        was not resolved beforehand (the caller resolves it and asks again)."""
        ...

    def group_changed(self, partition: int, group_id: str) -> None:
        """A group metadata record of `group_id` was replayed."""
        ...

    def unloaded(self, partition: int) -> None:
        """The shard of `partition` is no longer served."""
        ...


def _error(e: GroupError) -> KraftError:
    return KraftError(e.error_code, e.message)


class GroupShard(ClassicHandlers):
    def __init__(self, partition: int, env: GroupEnvironment, config: GroupConfig, offsets_retention_ms: int,
                 offsets_retention_check_interval_ms: int) -> None:
        self.partition = partition
        self.env = env
        self.config = config
        self.offsets_retention_ms = offsets_retention_ms
        self.offsets_retention_check_interval_ms = offsets_retention_check_interval_ms
        self._state = GroupsReplay(config)
        self.served = True  # until unloaded: a request waiting on this state then fails

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        """The committed groups, by id (read-only to everyone but `replay`)."""
        return self._state.groups

    def pending_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions with a transactional offset commit not yet decided (Kafka's
        pending transactional offsets: OffsetFetch's require_stable answers them unstable)."""
        return self._state.pending_offsets(group_id)

    # -- CoordinatorShard ---------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        group_id = self._state.replay(record.key, record.value, record.producer_id)
        if group_id is not None:
            self.env.group_changed(self.partition, group_id)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        self._state.end_transaction(producer_id, commit)

    def on_unloaded(self) -> None:
        self.served = False
        self.env.unloaded(self.partition)

    def on_loaded(self, now_ms: int) -> tuple[TimerChange, ...]:
        timers: list[TimerChange] = [self._expiry_timer(now_ms), *self.classic_timers_on_load(now_ms)]
        for group_id, group in self.groups.items():
            for member_id, member in group.members.items():
                timers.append(self._session_timer(group_id, member_id, now_ms))
                if member.pending_revocation:
                    timers.append(self._revocation_timer(group_id, member_id, now_ms + member.rebalance_timeout_ms))
        log.info("%s-%d: %d groups loaded%s", OFFSETS_TOPIC, self.partition, len(self.groups),
                 f" ({self._state.skipped} undecodable records skipped)" if self._state.skipped else "")
        return tuple(timers)

    # -- membership ---------------------------------------------------------------------------

    def heartbeat(self, group_id: str, req: HeartbeatRequest, new_member_id: str,
                  now_ms: int) -> CoordinatorResult[HeartbeatResponse]:
        """Kafka's ConsumerGroupHeartbeat: join, heartbeat or leave; `new_member_id` names a
        member that joins without an id."""
        committed = self.groups.get(group_id)
        if committed is not None and committed.classic is not None and committed.has_members:
            raise inconsistent_protocol(group_id, "classic")
        current, before, group = self._working_copy(group_id)
        image = self.env.image
        try:
            response = group.heartbeat(req, TopicPartitionCounts(image), new_member_id, self.env.regex_topics(image))
        except GroupError as e:
            raise _error(e) from None
        beating = None if req.member_epoch == LEAVE_EPOCH else response.member_id
        return self._membership_result(group_id, current, before, group, now_ms, response, beating)

    def fence_expired(self, now_ms: int, *, group_id: str, member_id: str, reason: str) -> CoordinatorResult[None]:
        """The timer of a member's session or rebalance timeout: it is fenced."""
        committed = self.groups.get(group_id)
        if committed is None or member_id not in committed.members:
            return CoordinatorResult((), None)
        current, before, group = self._working_copy(group_id)
        image = self.env.image
        group.fence_member(member_id, TopicPartitionCounts(image), self.env.regex_topics(image))
        log.info("group %s: removed %s after %s timeout", group_id, member_id, reason)
        return self._membership_result(group_id, current, before, group, now_ms, None, None)

    def _working_copy(self, group_id: str) -> tuple[ConsumerGroup | None, bytes, ConsumerGroup]:
        """The committed group (None if there is none), its metadata value, and a group with
        that membership to change."""
        current = self.groups.get(group_id)
        value = group_value(current or ConsumerGroup(group_id, self.config))
        return current, value, group_from_value(group_id, self.config, value)

    def _membership_result(self, group_id: str, current: ConsumerGroup | None, before: bytes,
                           group: ConsumerGroup, now_ms: int, response: T,
                           beating: str | None) -> CoordinatorResult[T]:
        """The group's metadata record if the change made one, and the members' timers."""
        if current is not None and current.members and not group.members:
            group.empty_since_ms = now_ms  # its offsets' retention counts from here
        after = group_value(group)
        records: tuple[Record, ...] = ((group_key(group_id), after),) if after != before else ()
        return CoordinatorResult(records, response, self._member_timers(group_id, current, group, beating, now_ms))

    def _member_timers(self, group_id: str, before: ConsumerGroup | None, after: ConsumerGroup,
                       beating: str | None, now_ms: int) -> tuple[TimerChange, ...]:
        """A heartbeat renews its member's session; a member asked to revoke more gets its
        rebalance timeout from now, one done revoking loses it; a member gone loses both."""
        old = before.members if before is not None else {}
        changes: list[TimerChange] = []
        for member_id in old.keys() - after.members.keys():
            changes += [CancelTimer((SESSION, group_id, member_id)), CancelTimer((REVOCATION, group_id, member_id))]
        for member_id, member in after.members.items():
            if member_id == beating:
                changes.append(self._session_timer(group_id, member_id, now_ms))
            was = old.get(member_id)
            revoking_before = was.pending_revocation if was is not None else frozenset()
            if member.pending_revocation - revoking_before:
                changes.append(self._revocation_timer(group_id, member_id, now_ms + member.rebalance_timeout_ms))
            elif revoking_before and not member.pending_revocation:
                changes.append(CancelTimer((REVOCATION, group_id, member_id)))
        return tuple(changes)

    def _session_timer(self, group_id: str, member_id: str, now_ms: int) -> ScheduleTimer:
        return ScheduleTimer((SESSION, group_id, member_id), now_ms + self.config.session_timeout_ms,
                             functools.partial(GroupShard.fence_expired, group_id=group_id,
                                               member_id=member_id, reason="session"))

    @staticmethod
    def _revocation_timer(group_id: str, member_id: str, deadline_ms: int) -> ScheduleTimer:
        return ScheduleTimer((REVOCATION, group_id, member_id), deadline_ms,
                             functools.partial(GroupShard.fence_expired, group_id=group_id,
                                               member_id=member_id, reason="rebalance"))

    # -- offsets ------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, member_epoch: int,
                       offsets: dict[TopicPartition, tuple[int, str]], now_ms: int,
                       group_instance_id: str | None = None) -> CoordinatorResult[None]:
        """Kafka's OffsetCommit, validated against the membership (`validate_offset_commit`; a
        classic group's with `member_epoch` as the generation id)."""
        group = self.groups.get(group_id) or ConsumerGroup(group_id, self.config)
        if group.classic is not None:
            self.classic_validate_commit(group, member_id, group_instance_id, member_epoch)
        else:
            try:
                group.validate_offset_commit(member_id, member_epoch)
            except GroupError as e:
                raise _error(e) from None
        return CoordinatorResult(self._commit_records(group_id, offsets, now_ms), None)

    def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                     offsets: dict[TopicPartition, tuple[int, str]],
                                     now_ms: int) -> CoordinatorResult[None]:
        """Kafka's TxnOffsetCommit: the offsets, in the producer's transactional batch; the group
        sees them once the transaction's COMMIT marker is replayed (`complete_transaction`).
        The partition's producer state fences an older epoch (INVALID_PRODUCER_EPOCH) and
        refuses a transaction the coordinator did not add this partition to (INVALID_TXN_STATE)."""
        return CoordinatorResult(self._commit_records(group_id, offsets, now_ms), None,
                                 producer=TransactionalProducer(producer_id, producer_epoch))

    def complete_transaction(self, now_ms: int, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                             commit: bool) -> CoordinatorResult[None]:
        """Kafka's WriteTxnMarkers to this partition: the marker, written and replayed here."""
        return CoordinatorResult((), None, end_transaction=EndTransaction(
            producer_id, producer_epoch, coordinator_epoch, commit))

    def check_resettable(self, group_id: str) -> None:
        """Offsets are reset only in a group without members (NON_EMPTY_GROUP)."""
        group = self.groups.get(group_id)
        if group is not None and group.has_members:
            raise KraftError("NON_EMPTY_GROUP", f"assignments can only be reset if group {group_id!r} is "
                             f"inactive, but the current state is {group.state}")

    def reset_offsets(self, group_id: str, offsets: dict[TopicPartition, int], now_ms: int) -> CoordinatorResult[None]:
        """kafka-consumer-groups --reset-offsets --execute."""
        self.check_resettable(group_id)
        records = self._commit_records(group_id, {tp: (o, "") for tp, o in offsets.items()}, now_ms)
        return CoordinatorResult(records, None)

    @staticmethod
    def _commit_records(group_id: str, offsets: dict[TopicPartition, tuple[int, str]],
                        now_ms: int) -> tuple[Record, ...]:
        return tuple((offset_key(group_id, t, p), offset_value(OffsetAndMetadata(o, m, now_ms)))
                     for (t, p), (o, m) in sorted(offsets.items()))

    def delete_group(self, group_id: str, now_ms: int) -> CoordinatorResult[None]:
        group = self._existing(group_id)
        if group.has_members:
            raise KraftError("NON_EMPTY_GROUP", f"group {group_id!r} has {group.member_count} active members")
        tombstones: list[Record] = [(offset_key(group_id, t, p), None) for t, p in sorted(group.offsets)]
        return CoordinatorResult((*tombstones, (group_key(group_id), None)), None)

    def delete_offsets(self, group_id: str, topics: Iterable[tuple[str, tuple[int, ...] | None]],
                       now_ms: int) -> CoordinatorResult[list[DeletedOffset]]:
        """Kafka's OffsetDelete: the committed offsets of the topics' partitions (all of a topic's
        when None). A partition of a topic an active member subscribes to answers
        GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset."""
        group = self._existing(group_id)
        image = self.env.image
        subscribed = self._subscribed(group)
        results: list[DeletedOffset] = []
        dropped: list[Record] = []
        for topic, partitions in topics:
            t = image.topic_by_name(topic)
            if partitions is None:
                partitions = tuple(sorted(t.partitions)) if t is not None else tuple(
                    sorted(p for (name, p) in group.offsets if name == topic))
            for p in partitions:
                entry = DeletedOffset(topic, p)
                if t is None or p not in t.partitions:
                    entry = DeletedOffset(topic, p, "UNKNOWN_TOPIC_OR_PARTITION",
                                          "This server does not host this topic-partition.")
                elif topic in subscribed:
                    entry = DeletedOffset(topic, p, "GROUP_SUBSCRIBED_TO_TOPIC",
                                          "The consumer group is actively subscribed to the topic")
                elif (topic, p) in group.offsets:
                    dropped.append((offset_key(group_id, topic, p), None))
                results.append(entry)
        return CoordinatorResult(tuple(dropped), results)

    @staticmethod
    def _subscribed(group: ConsumerGroup) -> set[str]:
        """The topics whose offsets OffsetDelete keeps: those the members subscribe to or own.
        A classic group whose subscriptions are not the consumer protocol's keeps them all while
        it has members (Kafka: NON_EMPTY_GROUP)."""
        classic = group.classic
        if classic is None:
            return {t for m in group.members.values() for t in (*m.subscribed_topics, *(t for t, _ in m.assigned))}
        if not classic.members:
            return set()
        topics = classic.subscribed_topics()
        if topics is None:
            raise KraftError("NON_EMPTY_GROUP", f"group {group.group_id!r} has members of protocol type "
                             f"{classic.protocol_type!r}: its offsets are deleted once it is empty")
        return {*topics, *(t for m in classic.members.values() for t, _ in classic.assigned(m))}

    def _existing(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise KraftError("GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
        return group

    # -- offset retention ---------------------------------------------------------------------

    def expire_offsets(self, now_ms: int) -> CoordinatorResult[int]:
        """Kafka's cleanupGroupMetadata: tombstones for the offsets that expired
        (`expiration.py`) and for the groups left with neither members nor offsets. Answers how
        many offsets it removes."""
        started = time.monotonic()
        expired = {gid: tps for gid, g in self.groups.items()
                   if (tps := expired_offsets(g, now_ms, self.offsets_retention_ms))}
        gone = [gid for gid, tps in expired.items() if removes_group(self.groups[gid], tps)]
        records: list[Record] = [(offset_key(gid, t, p), None) for gid, tps in expired.items() for t, p in tps]
        records += [(group_key(gid), None) for gid in gone]
        removed = sum(len(tps) for tps in expired.values())
        if removed:
            log.info("Removed %d expired offsets in %d milliseconds.", removed,
                     (time.monotonic() - started) * 1000)
        return CoordinatorResult(tuple(records), removed)

    def expire_offsets_periodically(self, now_ms: int) -> CoordinatorResult[int]:
        """The expiry check's timer: `expire_offsets`, then the next check."""
        result = self.expire_offsets(now_ms)
        return CoordinatorResult(result.records, result.response, (self._expiry_timer(now_ms),))

    def _expiry_timer(self, now_ms: int) -> ScheduleTimer:
        return ScheduleTimer(OFFSETS_EXPIRY, now_ms + self.offsets_retention_check_interval_ms,
                             GroupShard.expire_offsets_periodically)

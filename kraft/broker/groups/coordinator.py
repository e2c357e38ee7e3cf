"""The group coordinator: the asyncio shell that implements `kraft.server.groups.GroupService`
on the coordinator runtime (`kraft/coordinator/`), with one `GroupShard` per `__consumer_offsets`
partition this broker leads (the metadata publisher hands the runtime its elections and
resignations).

Routing: a group belongs to one partition (`hashing`); `__consumer_offsets` is created on first
use. A request waits up to 15 s, on events (a new metadata image, the end of the partition's load),
for the partition to have a leader and be loaded here; else it answers NOT_COORDINATOR naming the
leader, COORDINATOR_NOT_AVAILABLE while there is none, or COORDINATOR_LOAD_IN_PROGRESS.

Changes (heartbeats, commits, deletions, resets) are handlers of the shard that the runtime runs in
the partition's turn; they are answered once their records are committed and replayed. The topics
the members' regexes subscribe them to are resolved before (`regex_resolver`: cached per image,
off the loop's critical path) and looked up by the handler; one that was missed (a member joined
meanwhile, the topics changed) is resolved and the change tried again. Reads (offsets, describe,
list) read the shard's state, which is committed state. Lag and offset resets read each
partition's offsets from its leader (`leader_offsets.py`). The lag metrics (kraft/metrics.py) read
`list_groups` and `describe_group`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol, TypeVar

from kraft.broker.groups.classic import STABLE, ClassicGroup, JoinRequest, JoinResult
from kraft.broker.groups.consumer_protocol import encode_assignment, encode_subscription
from kraft.broker.groups.classic_handlers import JoinOutcome
from kraft.broker.groups.errors import GroupError
from kraft.broker.groups.group_waits import GroupWaits
from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.broker.groups.leader_offsets import LeaderOffsets, LocalOffsets
from kraft.broker.groups.membership import JOIN_EPOCH, ConsumerGroup, GroupConfig, HeartbeatRequest, Member, RegexTopics
from kraft.broker.groups.regex_resolver import RegexKey, RegexResolver, Unresolved
from kraft.broker.groups.shard import GroupShard
from kraft.broker.groups.topic_regex import compile_regex
from kraft.broker.metadata_view import MetadataCache
from kraft.coordinator.partition_writer import PartitionWriter
from kraft.coordinator.result import Operation
from kraft.coordinator.router import CoordinatorRouter
from kraft.coordinator.runtime import CoordinatorRuntime, RuntimeSettings
from kraft.coordinator.timer import Scheduler
from kraft.errors import KraftError
from kraft.metadata.image import MetadataImage
from kraft.server.admin import AdminService
from kraft.server.groups import (
    ClassicDescription, ClassicMemberDescription, CommitOffsetsResult, CommittedOffset, DeleteGroupResult, DeleteOffsetsResult, FetchOffsetsResult,
    FindCoordinatorResult, GroupDescription, GroupHeartbeat, GroupOffset, GroupSummary, HeartbeatResult,
    ListGroupsResult, MemberDescription, NodeEndpoint, OffsetCommitEntry, OffsetLag, OffsetReset, ResetOffset,
    ResetOffsetsResult, by_topic, commit_per_partition,
)

log = logging.getLogger("kraft.groups")

COORDINATOR_WAIT_S = 15.0  # how long a request waits for its partition's leader and load
REGEX_ATTEMPTS = 5  # a change retried this often when its members' regexes keep changing

T = TypeVar("T")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class CoordinatorSettings:
    num_partitions: int = 50
    replication_factor: int = 3
    group: GroupConfig = GroupConfig()
    offsets_retention_ms: int = 10080 * 60_000  # offsets.retention.minutes (Kafka: 7 days)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    runtime: RuntimeSettings = RuntimeSettings()


class CoordinatorReplicas(PartitionWriter, LocalOffsets, Protocol):
    """What the coordinator asks of the replica manager: the runtime's produce and reads, and
    the offsets of the partitions led here."""


def _regex_key(regex: str, member: Member | HeartbeatRequest) -> RegexKey:
    return regex, member.principal, member.client_host




class GroupCoordinator:
    def __init__(
        self,
        node_id: int,
        replicas: CoordinatorReplicas,
        admin: AdminService,
        settings: CoordinatorSettings,
        clock: Callable[[], int] = now_ms,
        metadata_cache: MetadataCache | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        """`metadata_cache` holds the broker's image (default: one of its own, for tests);
        `scheduler` runs the timers (default: the event loop)."""
        self.node_id = node_id
        self.admin = admin
        self.settings = settings
        self.metadata_cache = metadata_cache or MetadataCache()
        self.leader_offsets = LeaderOffsets(node_id, replicas, lambda: self.image)
        self.regexes = RegexResolver()  # the node sets its authorizer when ACLs are on
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            OFFSETS_TOPIC, replicas, self._new_shard, clock, settings.runtime, scheduler)
        self.waits = GroupWaits()
        self.router: CoordinatorRouter[GroupShard] = CoordinatorRouter(
            node_id, self.runtime, self.metadata_cache, admin, settings.num_partitions,
            settings.replication_factor, lambda rf: {"cleanup.policy": "compact"}, COORDINATOR_WAIT_S)

    def _new_shard(self, partition: int) -> GroupShard:
        return GroupShard(partition, self, self.settings.group, self.settings.offsets_retention_ms,
                          self.settings.offsets_retention_check_interval_ms)

    async def close(self) -> None:
        await self.runtime.close()
        await self.leader_offsets.close()

    # -- GroupEnvironment ---------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.metadata_cache.image

    def regex_topics(self, image: MetadataImage) -> RegexTopics:
        return lambda m: self.regexes.lookup(image, _regex_key(m.subscribed_topic_regex or "", m))

    def group_changed(self, partition: int, group_id: str) -> None:
        self.waits.changed(partition, group_id)

    def unloaded(self, partition: int) -> None:
        self.waits.unloaded(partition)

    # -- routing ------------------------------------------------------------------------------

    def _partition_for(self, group_id: str) -> int:
        return self.router.partition_for(group_id)

    def _coordinator(self, partition: int, image: MetadataImage) -> NodeEndpoint | None:
        return self.router.coordinator(partition, image)

    async def _shard(self, group_id: str, create: bool = True) -> tuple[int, GroupShard]:
        """The partition of `group_id` and its loaded shard, or NOT_COORDINATOR / COORDINATOR_*."""
        if create:
            await self.router.ensure_topic()
        elif not self.router.exists():
            raise KraftError("GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
        return await self.router.shard(group_id, f"group {group_id!r}")

    async def _resolve_regexes(self, group: ConsumerGroup | None, request: HeartbeatRequest | None) -> None:
        """Resolves what the regexes of the group's members (and of the member `request` joins or
        updates) subscribe them to, with each member's principal, for the handler to look up."""
        members = group.members if group is not None else {}
        keys = {_regex_key(m.subscribed_topic_regex, m) for m in members.values() if m.subscribed_topic_regex}
        if request is not None and request.member_epoch >= JOIN_EPOCH:
            member = None if request.member_epoch == JOIN_EPOCH else members.get(request.member_id)
            regex = request.subscribed_topic_regex
            if regex is None and member is not None:
                regex = member.subscribed_topic_regex
            if regex:
                keys.add(_regex_key(regex, member or request))
        if keys:
            await self.regexes.resolve(self.image, keys)

    async def _change_membership(self, partition: int, group_id: str, request: HeartbeatRequest,
                                 name: str, operation: Operation[GroupShard, T]) -> T:
        """Runs a membership handler once what its members' regexes resolve to is known."""
        for _ in range(REGEX_ATTEMPTS):
            shard = await self.runtime.active(partition, COORDINATOR_WAIT_S)
            await self._resolve_regexes(shard.groups.get(group_id), request)
            try:
                return await self.runtime.write(partition, name, operation)
            except Unresolved:
                continue  # a member with another regex joined meanwhile, or the topics changed
        raise KraftError("COORDINATOR_LOAD_IN_PROGRESS",
                         f"the subscriptions of group {group_id!r} keep changing: retry")

    # -- GroupService -------------------------------------------------------------------------

    async def find_coordinator(self, group_id: str) -> FindCoordinatorResult:
        partition, coordinator = await self.router.find(group_id)
        return FindCoordinatorResult(group_id, partition, coordinator)

    async def heartbeat(self, group_id: str, request: GroupHeartbeat) -> HeartbeatResult:
        if request.subscribed_topic_regex:
            try:
                compile_regex(request.subscribed_topic_regex)  # refused before anything is resolved
            except GroupError as e:
                raise KraftError(e.error_code, e.message) from None
        partition, _ = await self._shard(group_id)
        req = HeartbeatRequest(
            request.member_id, request.member_epoch, request.client_id, request.client_host, request.principal,
            request.subscribed_topics, request.subscribed_topic_regex, request.server_assignor,
            request.owned, request.rebalance_timeout_ms,
        )
        new_member_id = uuid.uuid4().hex
        response = await self._change_membership(
            partition, group_id, req, "heartbeat",
            lambda shard, now: shard.heartbeat(group_id, req, new_member_id, now))
        return HeartbeatResult(response.member_id, response.member_epoch, response.heartbeat_interval_ms,
                               by_topic(response.assignment))

    def _check_partitions(self, tps: Iterable[tuple[str, int]]) -> None:
        for topic, partition in tps:
            if self.image.partition(topic, partition) is None:
                raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic}-{partition} does not exist")

    async def _commit_known(self, group_id: str, offsets: list[OffsetCommitEntry], what: str,
                            write: Callable[[GroupShard, dict[tuple[str, int], tuple[int, str]], int], object]
                            ) -> CommitOffsetsResult:
        """Kafka's rule for both commits: a partition that does not exist answers
        UNKNOWN_TOPIC_OR_PARTITION, the others go to the shard (`write`: its commit of them)."""
        async def commit(known: list[OffsetCommitEntry]) -> CommitOffsetsResult:
            partition, _ = await self._shard(group_id)
            commits = {(e.topic, e.partition): (e.offset, e.metadata) for e in known}
            await self.runtime.write(partition, what, lambda shard, now: write(shard, commits, now))
            return CommitOffsetsResult(tuple(CommittedOffset(e.topic, e.partition, e.offset) for e in known))

        def unknown(entry: OffsetCommitEntry) -> str | None:
            return "UNKNOWN_TOPIC_OR_PARTITION" if self.image.partition(entry.topic, entry.partition) is None else None
        return await commit_per_partition(offsets, unknown, commit)

    async def commit_offsets(
        self, group_id: str, member_id: str, member_epoch: int, offsets: list[OffsetCommitEntry],
        group_instance_id: str | None = None,
    ) -> CommitOffsetsResult:
        """`member_epoch` is a classic group's generation id. Kafka's handleOffsetCommitRequest: a
        partition that does not exist answers UNKNOWN_TOPIC_OR_PARTITION and the others are
        committed (none left: the group is not asked); a group-level refusal (ILLEGAL_GENERATION,
        UNKNOWN_MEMBER_ID...) answers the known ones and leaves the unknown ones theirs."""
        return await self._commit_known(group_id, offsets, "commit-offsets", lambda shard, commits, now: (
            shard.commit_offsets(group_id, member_id, member_epoch, commits, now, group_instance_id)))

    async def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                           offsets: list[OffsetCommitEntry]) -> CommitOffsetsResult:
        """Kafka's TxnOffsetCommit: held until the transaction's marker (GroupShard); per
        partition as handleTxnOffsetCommitRequest (`_commit_known`)."""
        return await self._commit_known(group_id, offsets, "txn-offset-commit", lambda shard, commits, now: (
            shard.commit_transactional_offsets(group_id, producer_id, producer_epoch, commits, now)))

    async def write_txn_marker(self, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool) -> None:
        """A transaction's marker for `__consumer_offsets-partition`, written and replayed by its
        shard (NOT_COORDINATOR here when this broker does not lead it)."""
        await self.runtime.active(partition, COORDINATOR_WAIT_S)
        await self.runtime.write(partition, "txn-marker", lambda shard, now: shard.complete_transaction(
            now, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, commit=commit))

    async def fetch_offsets(self, group_id: str, topics: list[str] | None) -> FetchOffsetsResult:
        _, shard = await self._shard(group_id)
        group = shard.groups.get(group_id)
        items = [] if group is None else sorted(group.offsets.items())
        return FetchOffsetsResult(group_id, tuple(
            GroupOffset(t, p, o.offset, o.metadata, o.commit_timestamp_ms)
            for (t, p), o in items if topics is None or t in topics
        ), tuple(sorted(tp for tp in shard.pending_offsets(group_id) if topics is None or tp[0] in topics)))

    async def list_groups(self) -> ListGroupsResult:
        groups = [GroupSummary(g.group_id, g.state, _protocol_type(g), g.member_count, self.node_id, g.protocol)
                  for _, shard in self.runtime.active_shards() for g in shard.groups.values()]
        return ListGroupsResult(tuple(sorted(groups, key=lambda g: g.group_id)))

    async def describe_group(self, group_id: str) -> GroupDescription:
        partition, shard = await self._shard(group_id, create=False)
        group = shard.groups.get(group_id)
        if group is None:
            raise KraftError("GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
        members = _member_descriptions(group)
        partitions = set(group.offsets)
        for m in members:
            partitions |= {(a.topic, p) for a in m.assignment for p in a.partitions}
        # The leaders' high watermarks (what a consumer can read to), asked in parallel.
        ends = await self.leader_offsets.offsets_or_none(sorted(partitions))
        offsets = []
        for tp in sorted(partitions):
            committed = group.offsets.get(tp)
            end = ends[tp]
            leo = None if end is None else end.high_watermark
            current = None if committed is None else committed.offset
            offsets.append(OffsetLag(tp[0], tp[1], current, leo,
                                     None if current is None or leo is None else max(0, leo - current),
                                     group.owner_of(tp)))
        classic = group.classic
        return GroupDescription(
            group_id, group.state, _protocol_type(group),
            group.assignor if classic is None else classic.protocol_name or "",
            group.group_epoch if classic is None else classic.generation_id,
            group.assignment_epoch if classic is None else classic.generation_id,
            self._coordinator(partition, self.image), members, tuple(offsets), group.protocol)

    async def describe_classic(self, group_id: str) -> ClassicDescription:
        """Kafka's DescribeGroups: a classic group's members with their metadata and assignment
        (only while Stable, as Kafka answers); a KIP-848 group's with their subscriptions and
        assignments written in the consumer protocol; `Dead` for a group that does not exist."""
        dead = ClassicDescription(group_id, "Dead", "", "", ())
        try:
            _, shard = await self._shard(group_id, create=False)
        except KraftError as e:
            if e.error_code != "GROUP_ID_NOT_FOUND":
                raise
            return dead
        group = shard.groups.get(group_id)
        if group is None:
            return dead
        classic = group.classic
        if classic is None:
            return ClassicDescription(group_id, group.state, "consumer", group.assignor, tuple(
                ClassicMemberDescription(m.member_id, None, m.client_id, m.client_host,
                                         encode_subscription(m.subscribed_topics), encode_assignment(m.assigned))
                for m in sorted(group.members.values(), key=lambda m: m.member_id)))
        stable = classic.state is STABLE
        return ClassicDescription(
            group_id, classic.state.value, classic.protocol_type or "", (classic.protocol_name or "") if stable else "",
            tuple(ClassicMemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(classic.protocol_name) if stable else b"", m.assignment if stable else b"")
                for m in classic.members.values()))

    async def delete_group(self, group_id: str) -> DeleteGroupResult:
        partition, _ = await self._shard(group_id, create=False)
        await self.runtime.write(partition, "delete-group", lambda shard, now: shard.delete_group(group_id, now))
        return DeleteGroupResult(group_id)

    async def delete_offsets(self, group_id: str,
                             topics: list[tuple[str, tuple[int, ...] | None]]) -> DeleteOffsetsResult:
        """kafka-consumer-groups --delete-offsets (Kafka's OffsetDelete), `GroupShard.delete_offsets`."""
        partition, _ = await self._shard(group_id, create=False)
        results = await self.runtime.write(partition, "delete-offsets",
                                           lambda shard, now: shard.delete_offsets(group_id, topics, now))
        return DeleteOffsetsResult(group_id, tuple(results))

    async def reset_offsets(self, group_id: str, reset: OffsetReset) -> ResetOffsetsResult:
        """kafka-consumer-groups --reset-offsets: computes each partition's new offset (clamped to
        [log start, high watermark], as Kafka does) and commits it unless `dry_run`. Only a group
        without active members can be reset."""
        tps = []
        for topic in reset.topics:
            t = self.image.topic_by_name(topic)
            if t is None:
                raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist")
            for p in (reset.partitions if reset.partitions is not None else sorted(t.partitions)):
                tps.append((topic, p))
        self._check_partitions(tps)
        partition, shard = await self._shard(group_id)
        shard.check_resettable(group_id)
        group = shard.groups.get(group_id)
        previous = {tp: None if group is None or tp not in group.offsets else group.offsets[tp].offset
                    for tp in tps}
        targets = await asyncio.gather(*(self._reset_target(previous[tp], tp, reset) for tp in tps))
        new_offsets = dict(zip(tps, targets))
        if not reset.dry_run:
            await self.runtime.write(partition, "reset-offsets",
                                     lambda shard, now: shard.reset_offsets(group_id, new_offsets, now))
        return ResetOffsetsResult(group_id, reset.dry_run, tuple(
            ResetOffset(t, p, new_offsets[(t, p)], previous[(t, p)]) for t, p in tps))

    async def _reset_target(self, committed: int | None, tp: tuple[str, int], reset: OffsetReset) -> int:
        offsets = await self.leader_offsets.offsets(tp)
        start, end = offsets.log_start_offset, offsets.high_watermark
        if reset.strategy == "earliest":
            return start
        if reset.strategy == "latest":
            return end
        assert reset.value is not None
        if reset.strategy == "offset":
            target = reset.value
        elif reset.strategy == "datetime":
            found = await self.leader_offsets.offset_for_timestamp(tp, reset.value)
            target = end if found is None else found[0]
        else:
            if committed is None:
                raise KraftError("INVALID_REQUEST", f"cannot shift the offset of {tp[0]}-{tp[1]}: "
                                 "the group has no committed offset for it")
            target = committed + reset.value
        return min(max(target, start), end)

    # -- offset retention ---------------------------------------------------------------------

    async def expire_offsets(self) -> int:
        """One offsets expiry check now on every loaded partition (the shards' timers run it
        every `offsets.retention.check.interval.ms`); how many offsets were removed."""
        removed = 0
        for answer in await self.runtime.write_all("expire-offsets", lambda shard, now: shard.expire_offsets(now)):
            if isinstance(answer, BaseException):
                log.warning("expiring offsets: %s", answer)
            else:
                removed += answer
        return removed

    # -- classic groups -------------------------------------------------------------------------

    async def join_group(self, group_id: str, request: JoinRequest) -> JoinResult:
        """Kafka's JoinGroup. MEMBER_ID_REQUIRED carries the member id to join with
        (`KraftError.extra["member_id"]`)."""
        _check_group_id(group_id)
        partition, _ = await self._shard(group_id)
        new_member_id = f"{request.client_id}-{uuid.uuid4()}"
        outcome: JoinOutcome = await self.runtime.write(
            partition, "join-group", lambda shard, now: shard.classic_join(group_id, request, new_member_id, now))
        if outcome.member_id_required:
            raise KraftError("MEMBER_ID_REQUIRED", "join again with the member id given",
                             member_id=outcome.member_id)
        if outcome.result is not None:
            return outcome.result
        # The rebalance completes with the others' joins, or at the latest at its timeout.
        return await self._answer(partition, group_id, request.rebalance_timeout_ms,
                                  lambda group: group.join_answer(outcome.member_id, request.group_instance_id))

    async def sync_group(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> bytes:
        """Kafka's SyncGroup: the member's assignment (a follower's once the leader's is stored)."""
        _check_group_id(group_id)
        partition, _ = await self._shard(group_id)
        assignment = await self.runtime.write(partition, "sync-group", lambda shard, now: shard.classic_sync(
            group_id, member_id, group_instance_id, generation_id, protocol_type, protocol_name, assignments, now))
        if assignment is not None:
            return bytes(assignment)
        _, shard = await self._shard(group_id)
        group = shard.groups.get(group_id)
        member = group.classic.members.get(member_id) if group is not None and group.classic else None
        timeout_ms = member.rebalance_timeout_ms if member is not None else 0
        return await self._answer(partition, group_id, timeout_ms,
                                  lambda group: group.sync_answer(member_id, group_instance_id, generation_id))

    async def classic_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                                generation_id: int) -> None:
        """Kafka's Heartbeat; REBALANCE_IN_PROGRESS when the member must rejoin."""
        _check_group_id(group_id)
        partition, _ = await self._shard(group_id)
        error = await self.runtime.write(partition, "heartbeat", lambda shard, now: shard.classic_heartbeat(
            group_id, member_id, group_instance_id, generation_id, now))
        if error is not None:
            raise KraftError(error, f"group {group_id!r} is rebalancing: join again")

    async def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> list[str | None]:
        """Kafka's LeaveGroup: each (member id, group instance id)'s error, None when it left."""
        _check_group_id(group_id)
        partition, _ = await self._shard(group_id)
        errors: list[str | None] = await self.runtime.write(
            partition, "leave-group", lambda shard, now: shard.classic_leave(group_id, members, now))
        return errors

    async def _answer(self, partition: int, group_id: str, timeout_ms: int,
                      answer: Callable[[ClassicGroup], T | None]) -> T:
        """`answer(group)` of the committed classic group once it is not None, asked again at
        each change of the group; NOT_COORDINATOR if the partition is unloaded meanwhile, and
        REBALANCE_IN_PROGRESS if nothing moved the group in `timeout_ms` (and the coordinator's
        own wait) - the group's timers make it move before."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000 + COORDINATOR_WAIT_S
        shard = await self.runtime.active(partition, 0)
        while True:
            if not shard.served:  # resigned or reloaded: the client finds the coordinator again
                raise self.runtime.not_coordinator(partition)
            group = shard.groups.get(group_id)
            if group is None or group.classic is None:
                raise KraftError("UNKNOWN_MEMBER_ID", f"group {group_id!r} has no classic members")
            try:
                result = answer(group.classic)
            except GroupError as e:
                raise KraftError(e.error_code, e.message) from None
            if result is not None:
                return result
            changed = self.waits.event(partition, group_id)
            try:
                async with asyncio.timeout(max(0.0, deadline - loop.time())):
                    await changed.wait()
            except TimeoutError:
                raise KraftError("REBALANCE_IN_PROGRESS", f"group {group_id!r} did not complete its "
                                 "rebalance in time: join again") from None


def _member_descriptions(group: ConsumerGroup) -> tuple[MemberDescription, ...]:
    """The members of a KIP-848 group; a classic group's with their generation as the epoch and
    what their consumer protocol metadata and assignment say."""
    classic = group.classic
    if classic is None:
        return tuple(MemberDescription(
            m.member_id, m.member_epoch, m.client_id, m.client_host, tuple(m.subscribed_topics),
            m.subscribed_topic_regex, by_topic(m.assigned), by_topic(m.pending_revocation),
            by_topic(tuple(group.target.get(m.member_id, ()))),
        ) for m in sorted(group.members.values(), key=lambda m: m.member_id))
    out = []
    for m in sorted(classic.members.values(), key=lambda m: m.member_id):
        assigned = by_topic(classic.assigned(m))
        out.append(MemberDescription(
            m.member_id, classic.generation_id, m.client_id, m.client_host, classic.member_topics(m), None,
            assigned, (), assigned, m.group_instance_id))
    return tuple(out)


def _protocol_type(group: ConsumerGroup) -> str:
    """Kafka's protocol type: a classic group's own ("consumer" for consumers, "connect", ...)."""
    return "consumer" if group.classic is None else group.classic.protocol_type or ""


def _check_group_id(group_id: str) -> None:
    if not group_id:
        raise KraftError("INVALID_GROUP_ID", "the group id is empty")

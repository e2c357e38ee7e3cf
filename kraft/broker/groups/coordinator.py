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

from kraft.broker.groups.errors import GroupError
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
    CommitOffsetsResult, CommittedOffset, DeleteGroupResult, DeleteOffsetsResult, FetchOffsetsResult,
    FindCoordinatorResult, GroupDescription, GroupHeartbeat, GroupOffset, GroupSummary, HeartbeatResult,
    ListGroupsResult, MemberDescription, NodeEndpoint, OffsetCommitEntry, OffsetLag, OffsetReset, ResetOffset,
    ResetOffsetsResult, by_topic,
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

    async def commit_offsets(
        self, group_id: str, member_id: str, member_epoch: int, offsets: list[OffsetCommitEntry]
    ) -> CommitOffsetsResult:
        self._check_partitions((e.topic, e.partition) for e in offsets)
        partition, _ = await self._shard(group_id)
        commits = {(e.topic, e.partition): (e.offset, e.metadata) for e in offsets}
        await self.runtime.write(partition, "commit-offsets", lambda shard, now: shard.commit_offsets(
            group_id, member_id, member_epoch, commits, now))
        return CommitOffsetsResult(tuple(CommittedOffset(e.topic, e.partition, e.offset) for e in offsets))

    async def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                           offsets: list[OffsetCommitEntry]) -> None:
        """Kafka's TxnOffsetCommit: held until the transaction's marker (GroupShard)."""
        self._check_partitions((e.topic, e.partition) for e in offsets)
        partition, _ = await self._shard(group_id)
        commits = {(e.topic, e.partition): (e.offset, e.metadata) for e in offsets}
        await self.runtime.write(partition, "txn-offset-commit", lambda shard, now: shard.commit_transactional_offsets(
            group_id, producer_id, producer_epoch, commits, now))

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
        ))

    async def list_groups(self) -> ListGroupsResult:
        groups = [GroupSummary(g.group_id, g.state, "consumer", len(g.members), self.node_id)
                  for _, shard in self.runtime.active_shards() for g in shard.groups.values()]
        return ListGroupsResult(tuple(sorted(groups, key=lambda g: g.group_id)))

    async def describe_group(self, group_id: str) -> GroupDescription:
        partition, shard = await self._shard(group_id, create=False)
        group = shard.groups.get(group_id)
        if group is None:
            raise KraftError("GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
        members = tuple(MemberDescription(
            m.member_id, m.member_epoch, m.client_id, m.client_host, tuple(m.subscribed_topics),
            m.subscribed_topic_regex, by_topic(m.assigned), by_topic(m.pending_revocation),
            by_topic(tuple(group.target.get(m.member_id, ()))),
        ) for m in sorted(group.members.values(), key=lambda m: m.member_id))
        partitions = set(group.offsets)
        for m in group.members.values():
            partitions |= m.assigned
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
        return GroupDescription(group_id, group.state, "consumer", group.assignor, group.group_epoch,
                                group.assignment_epoch, self._coordinator(partition, self.image), members,
                                tuple(offsets))

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

"""The group coordinator: the asyncio shell around `ConsumerGroup` that implements
`kraft.server.groups.GroupService`.

It is a metadata publisher: for every `__consumer_offsets` partition this broker leads it loads
the groups by replaying the partition (requests for those groups get COORDINATOR_LOAD_IN_PROGRESS
meanwhile), and drops them when leadership moves (requests then get NOT_COORDINATOR naming the
new leader). Every change (commit, membership) is appended to the group's partition through the
replica manager's produce path with acks=all and answered only once appended, so a new
coordinator rebuilds exactly what was answered. One lock per partition orders changes with their
records. A periodic tick expires members whose session timed out; every
`offsets.retention.check.interval.ms` expired offsets are tombstoned (`expiration.py` decides
which). Lag and offset resets read the high watermark and log start of each partition from its
leader (`leader_offsets.py`). The lag metrics (kraft/metrics.py) read `list_groups` and
`describe_group`.

It reaches the replicas only through `CoordinatorReplicas` (the replica manager's produce API,
a partition's offsets and its committed records), never a replica or a log. A heartbeat or a tick
reads the topics its groups subscribe to by name (`TopicPartitionCounts`), never the whole image;
what the members' regexes subscribe them to (the matching topics their principal may Describe) is
resolved before the step by `regex_resolver`, cached per image, off the loop's critical path.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from kraft.errors import KraftError
from kraft.broker.groups.expiration import expired_offsets, removes_group
from kraft.broker.groups.hashing import OFFSETS_TOPIC, coordinator_partition
from kraft.broker.groups.leader_offsets import LeaderOffsets, LocalOffsets
from kraft.broker.groups.membership import (
    JOIN_EPOCH, ConsumerGroup, GroupConfig, GroupError, HeartbeatRequest, Member, OffsetAndMetadata, RegexTopics,
)
from kraft.broker.groups.regex_resolver import RegexKey, RegexResolver
from kraft.broker.groups.topic_regex import compile_regex
from kraft.broker.groups.records import (
    GroupsReplay, group_key, group_value, offset_key, offset_value,
)
from kraft.broker.metadata_view import MetadataCache
from kraft.log.batch import build_batch, decode_records, iter_batches
from kraft.metadata.image import MetadataImage
from kraft.server.admin import AdminService
from kraft.server.groups import (
    CommitOffsetsResult, CommittedOffset, DeletedOffset, DeleteGroupResult, DeleteOffsetsResult,
    FetchOffsetsResult, FindCoordinatorResult, GroupDescription, GroupHeartbeat, GroupOffset, GroupSummary,
    HeartbeatResult, ListGroupsResult, MemberDescription, NodeEndpoint, OffsetCommitEntry, OffsetLag, OffsetReset,
    ResetOffset, ResetOffsetsResult, by_topic,
)
from kraft.server.records import FetchPartitionResult, ProduceEntry, ProducePartitionResult

log = logging.getLogger("kraft.groups")

LOAD_CHUNK_BYTES = 1 << 20
LOAD_WAIT_MS = 500  # a load's read waits this long for the high watermark to pass the records
LOAD_RETRY_S = 0.1  # a partition not readable yet (its role not applied, offline) is asked again
APPEND_TIMEOUT_MS = 30_000
COORDINATOR_WAIT_S = 15.0  # how long a first request waits for __consumer_offsets to come up


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class CoordinatorSettings:
    num_partitions: int = 50
    replication_factor: int = 3
    group: GroupConfig = GroupConfig()
    tick_interval_ms: int = 250
    offsets_retention_ms: int = 10080 * 60_000  # offsets.retention.minutes (Kafka: 7 days)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms


@dataclass
class _Partition:
    """The groups of one `__consumer_offsets` partition this broker leads."""

    partition: int
    leader_epoch: int
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


class CoordinatorReplicas(LocalOffsets, Protocol):
    """What the coordinator asks of the replica manager: produce, and the offsets and committed
    records of a partition led here."""

    async def produce(
        self, entries: Sequence[ProduceEntry], acks: int, timeout_ms: int
    ) -> list[ProducePartitionResult]: ...

    async def read_committed(self, topic: str, partition: int, offset: int, max_bytes: int,
                             max_wait_ms: int) -> FetchPartitionResult:
        """Whole batches below the high watermark from `offset` of a partition led here,
        waiting up to `max_wait_ms` for some (a consumer fetch, not counted as one)."""
        ...


class TopicPartitionCounts(Mapping[str, int]):
    """The partition counts of the image's topics a subscription may name (internal topics are
    left out), looked up by name: a heartbeat costs the topics its group names, not the cluster.
    Only iteration walks every topic (regexes are resolved beforehand, `regex_resolver`)."""

    __slots__ = ("_image",)

    def __init__(self, image: MetadataImage) -> None:
        self._image = image

    def __getitem__(self, name: str) -> int:
        topic = self._image.topic_by_name(name)
        if topic is None or topic.internal:
            raise KeyError(name)
        return len(topic.partitions)

    def __iter__(self) -> Iterator[str]:
        return (name for name, t in self._image.topics.by_name.items() if not t.internal)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _regex_key(regex: str, member: Member | HeartbeatRequest) -> RegexKey:
    return regex, member.principal, member.client_host


def _error(e: GroupError) -> KraftError:
    return KraftError(e.error_code, e.message)


class GroupCoordinator:
    def __init__(
        self,
        node_id: int,
        replicas: CoordinatorReplicas,
        admin: AdminService,
        settings: CoordinatorSettings,
        clock: Callable[[], int] = now_ms,
        metadata_cache: MetadataCache | None = None,
    ) -> None:
        """`metadata_cache` holds the broker's image (default: one of its own, for tests)."""
        self.node_id = node_id
        self.replicas = replicas
        self.admin = admin
        self.settings = settings
        self.clock = clock
        self.metadata_cache = metadata_cache or MetadataCache()
        self.leader_offsets = LeaderOffsets(node_id, replicas, lambda: self.image)
        self.regexes = RegexResolver()  # the node sets its authorizer when ACLs are on
        self._partitions: dict[int, _Partition] = {}
        self._create_lock = asyncio.Lock()
        self._tick_task: asyncio.Task[None] | None = None
        self._expiry_task: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tick_task = loop.create_task(self._every(self.settings.tick_interval_ms, self.tick))
        self._expiry_task = loop.create_task(
            self._every(self.settings.offsets_retention_check_interval_ms, self.expire_offsets))

    async def close(self) -> None:
        self._closed = True
        tasks = [p.task for p in self._partitions.values() if p.task is not None]
        tasks += [t for t in (self._tick_task, self._expiry_task) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._partitions.clear()
        await self.leader_offsets.close()

    # -- metadata -----------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.metadata_cache.image

    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads `__consumer_offsets-<partition>` at `leader_epoch` (Kafka's
        `GroupCoordinator.onElection`): load its groups, unless already loaded at that epoch."""
        if self._closed:
            return
        state = self._partitions.get(partition)
        if state is not None and state.leader_epoch == leader_epoch:
            return
        if state is not None:
            self.on_resignation(partition)
        state = self._partitions[partition] = _Partition(partition, leader_epoch)
        state.task = asyncio.get_running_loop().create_task(self._load(state))

    def on_resignation(self, partition: int) -> None:
        """This broker no longer leads `__consumer_offsets-<partition>`: unload its groups."""
        state = self._partitions.pop(partition, None)
        if state is None:
            return
        if state.task is not None:
            state.task.cancel()
        log.info("no longer coordinator of %s-%d (%d groups unloaded)", OFFSETS_TOPIC, partition,
                 len(state.groups))

    async def _load(self, state: _Partition) -> None:
        try:
            await self._replay(state)
        except asyncio.CancelledError:
            raise
        except Exception:  # the partition stays unloaded: its groups answer LOAD_IN_PROGRESS
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, state.partition)

    async def _replay(self, state: _Partition) -> None:
        """Up to the log end as we took over, trusting only records below the high watermark:
        the tail the previous leader wrote counts once the ISR has it (Kafka's loader waits on
        the HW; `read_committed` waits for it)."""
        tp = (OFFSETS_TOPIC, state.partition)
        offsets = await self._readable(tp, lambda: self.replicas.offsets(*tp))
        replay = GroupsReplay(self.settings.group)
        started = time.monotonic()
        offset, target, count = offsets.log_start_offset, offsets.log_end_offset, 0
        while offset < target:
            info = await self._readable(tp, lambda: self._read(tp, offset))
            for pos, header in iter_batches(info.records):
                for record in decode_records(info.records, pos):
                    if offset <= record.offset < info.high_watermark:
                        replay.replay(record.key, record.value)
                        count += 1
                offset = header.next_offset
        now = self.clock()
        for group in replay.groups.values():
            group.refresh_sessions(now)
        state.groups = replay.groups
        state.loaded.set()
        log.info("loaded %d groups from %d records of %s-%d in %.3f s%s", len(state.groups), count,
                 OFFSETS_TOPIC, state.partition, time.monotonic() - started,
                 f" ({replay.skipped} undecodable skipped)" if replay.skipped else "")

    async def _read(self, tp: tuple[str, int], offset: int) -> FetchPartitionResult:
        info = await self.replicas.read_committed(tp[0], tp[1], offset, LOAD_CHUNK_BYTES, LOAD_WAIT_MS)
        if info.error_code is not None:
            raise KraftError(info.error_code, info.message or "")
        return info

    @staticmethod
    async def _readable(tp: tuple[str, int], read: Callable[[], Any]) -> Any:
        """`read()`, asked again while it answers a retriable error (the partition's log still
        opening, its role not applied yet, offline on a storage error); the load is cancelled
        when leadership moves."""
        waiting = None
        while True:
            try:
                return await read()
            except KraftError as e:
                if not e.retriable:
                    raise
                if waiting != e.error_code:
                    waiting = e.error_code
                    log.info("loading %s-%d waits: %s", tp[0], tp[1], e)
            await asyncio.sleep(LOAD_RETRY_S)

    # -- routing ------------------------------------------------------------------------------

    def _partition_for(self, group_id: str) -> int:
        topic = self.image.topic_by_name(OFFSETS_TOPIC)
        count = len(topic.partitions) if topic is not None else self.settings.num_partitions
        return coordinator_partition(group_id, count)

    async def _ensure_offsets_topic(self) -> None:
        if self.image.topic_by_name(OFFSETS_TOPIC) is not None:
            return
        async with self._create_lock:
            if self.image.topic_by_name(OFFSETS_TOPIC) is not None:
                return
            rf = max(1, min(self.settings.replication_factor, len(self.image.live_brokers())))
            try:
                await self.admin.create_topic(OFFSETS_TOPIC, self.settings.num_partitions, rf,
                                              {"cleanup.policy": "compact"})
                log.info("created %s with %d partitions, replication factor %d", OFFSETS_TOPIC,
                         self.settings.num_partitions, rf)
            except KraftError as e:
                if e.error_code != "TOPIC_ALREADY_EXISTS":
                    raise

    def _coordinator(self, partition: int) -> NodeEndpoint | None:
        reg = self.image.partition(OFFSETS_TOPIC, partition)
        endpoint = self.image.leader_endpoint(OFFSETS_TOPIC, partition)
        if reg is None or endpoint is None:
            return None
        return NodeEndpoint(reg.leader, endpoint.host, endpoint.port)

    async def _state(self, group_id: str, create: bool = True) -> _Partition:
        """The loaded partition state owning `group_id`, or NOT_COORDINATOR / COORDINATOR_* errors."""
        if create:
            await self._ensure_offsets_topic()
        elif self.image.topic_by_name(OFFSETS_TOPIC) is None:
            raise KraftError("GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
        partition = self._partition_for(group_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + COORDINATOR_WAIT_S
        while True:
            state = self._partitions.get(partition)
            if state is not None:
                try:
                    await asyncio.wait_for(state.loaded.wait(), max(0.0, deadline - loop.time()))
                except asyncio.TimeoutError:
                    raise KraftError("COORDINATOR_LOAD_IN_PROGRESS",
                                     f"{OFFSETS_TOPIC}-{partition} is still loading") from None
                if self._partitions.get(partition) is state:
                    return state
                continue
            coordinator = self._coordinator(partition)
            if coordinator is not None and coordinator.node_id != self.node_id:
                raise KraftError("NOT_COORDINATOR", f"node {coordinator.node_id} coordinates group "
                                 f"{group_id!r}", coordinator=asdict(coordinator))
            if loop.time() >= deadline:
                raise KraftError("COORDINATOR_NOT_AVAILABLE",
                                 f"{OFFSETS_TOPIC}-{partition} has no leader yet")
            await asyncio.sleep(0.05)  # the metadata naming this broker leader is on its way

    async def _append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        batch = build_batch([(k, v, (), self.clock()) for k, v in records])
        [result] = await self.replicas.produce(
            [ProduceEntry(OFFSETS_TOPIC, partition, batch)], acks=-1, timeout_ms=APPEND_TIMEOUT_MS)
        if result.error_code:
            code = "COORDINATOR_NOT_AVAILABLE" if result.error_code in (
                "NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT",
                "KAFKA_STORAGE_ERROR", "UNKNOWN_TOPIC_OR_PARTITION") else result.error_code
            raise KraftError(code, f"writing to {OFFSETS_TOPIC}-{partition}: {result.message}")

    def _topic_counts(self) -> TopicPartitionCounts:
        return TopicPartitionCounts(self.image)

    async def _regex_topics(self, group: ConsumerGroup, request: HeartbeatRequest | None) -> RegexTopics:
        """What the regexes of the group's members (and of the member `request` joins or
        updates) subscribe them to, resolved with each member's principal."""
        keys = {_regex_key(m.subscribed_topic_regex, m) for m in group.members.values() if m.subscribed_topic_regex}
        if request is not None and request.member_epoch >= JOIN_EPOCH:
            member = None if request.member_epoch == JOIN_EPOCH else group.members.get(request.member_id)
            regex = request.subscribed_topic_regex
            if regex is None and member is not None:
                regex = member.subscribed_topic_regex
            if regex:
                keys.add(_regex_key(regex, member or request))
        resolved = await self.regexes.resolve(self.image, keys) if keys else {}
        return lambda m: resolved.get(_regex_key(m.subscribed_topic_regex or "", m), frozenset())

    async def _change_group(
        self, state: _Partition, group_id: str, change: Callable[[ConsumerGroup, RegexTopics], Any],
        request: HeartbeatRequest | None = None,
    ) -> Any:
        """Runs `change` on the group (created if new) under the partition lock, with what its
        members' regexes resolve to (`request`: a heartbeat that may bring a new one), appends the
        group's membership record when it changed, and keeps the old group if the append fails."""
        async with state.lock:
            existing = state.groups.get(group_id)
            group = existing or ConsumerGroup(group_id, self.settings.group)
            regex_topics = await self._regex_topics(group, request)
            backup = copy.deepcopy(existing)
            before = group_value(group)
            had_members = bool(group.members)
            try:
                result = change(group, regex_topics)
            except GroupError as e:
                raise _error(e) from None
            if had_members and not group.members:
                group.empty_since_ms = self.clock()  # its offsets' retention counts from here
            after = group_value(group)
            state.groups[group_id] = group
            if after != before:
                try:
                    await self._append(state.partition, [(group_key(group_id), after)])
                except BaseException:
                    if backup is None:
                        state.groups.pop(group_id, None)
                    else:
                        state.groups[group_id] = backup
                    raise
            if group.is_empty():
                state.groups.pop(group_id, None)
            return result

    # -- GroupService -------------------------------------------------------------------------

    async def find_coordinator(self, group_id: str) -> FindCoordinatorResult:
        await self._ensure_offsets_topic()
        partition = self._partition_for(group_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + COORDINATOR_WAIT_S
        while (coordinator := self._coordinator(partition)) is None:
            if loop.time() >= deadline:
                raise KraftError("COORDINATOR_NOT_AVAILABLE", f"{OFFSETS_TOPIC}-{partition} has no leader")
            await asyncio.sleep(0.05)
        return FindCoordinatorResult(group_id, partition, coordinator)

    async def heartbeat(self, group_id: str, request: GroupHeartbeat) -> HeartbeatResult:
        if request.subscribed_topic_regex:
            try:
                compile_regex(request.subscribed_topic_regex)  # refused before anything is resolved
            except GroupError as e:
                raise _error(e) from None
        state = await self._state(group_id)
        req = HeartbeatRequest(
            request.member_id, request.member_epoch, request.client_id, request.client_host, request.principal,
            request.subscribed_topics, request.subscribed_topic_regex, request.server_assignor,
            request.owned, request.rebalance_timeout_ms,
        )
        topics = self._topic_counts()
        response = await self._change_group(
            state, group_id, lambda g, regex_topics: g.heartbeat(req, topics, self.clock(), uuid.uuid4().hex,
                                                                 regex_topics), req)
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
        state = await self._state(group_id)
        async with state.lock:
            group = state.groups.get(group_id) or ConsumerGroup(group_id, self.settings.group)
            try:
                group.validate_offset_commit(member_id, member_epoch)
            except GroupError as e:
                raise _error(e) from None
            await self._commit(state, group, {(e.topic, e.partition): (e.offset, e.metadata) for e in offsets})
        return CommitOffsetsResult(tuple(CommittedOffset(e.topic, e.partition, e.offset) for e in offsets))

    async def _commit(
        self, state: _Partition, group: ConsumerGroup, offsets: dict[tuple[str, int], tuple[int, str]]
    ) -> None:
        """Appends the commits, then applies them (caller holds the partition lock)."""
        now = self.clock()
        values = {tp: OffsetAndMetadata(o, m, now) for tp, (o, m) in offsets.items()}
        if values:
            await self._append(state.partition, [
                (offset_key(group.group_id, t, p), offset_value(v)) for (t, p), v in sorted(values.items())])
        group.offsets.update(values)
        if not group.is_empty():
            state.groups.setdefault(group.group_id, group)

    async def fetch_offsets(self, group_id: str, topics: list[str] | None) -> FetchOffsetsResult:
        state = await self._state(group_id)
        group = state.groups.get(group_id)
        items = [] if group is None else sorted(group.offsets.items())
        return FetchOffsetsResult(group_id, tuple(
            GroupOffset(t, p, o.offset, o.metadata, o.commit_timestamp_ms)
            for (t, p), o in items if topics is None or t in topics
        ))

    async def list_groups(self) -> ListGroupsResult:
        groups = []
        for state in list(self._partitions.values()):
            if state.loaded.is_set():
                for g in state.groups.values():
                    groups.append(GroupSummary(g.group_id, g.state, "consumer", len(g.members), self.node_id))
        return ListGroupsResult(tuple(sorted(groups, key=lambda g: g.group_id)))

    async def describe_group(self, group_id: str) -> GroupDescription:
        state = await self._state(group_id, create=False)
        group = state.groups.get(group_id)
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
                                group.assignment_epoch, self._coordinator(state.partition), members,
                                tuple(offsets))

    async def delete_group(self, group_id: str) -> DeleteGroupResult:
        state = await self._state(group_id, create=False)
        async with state.lock:
            group = state.groups.get(group_id)
            if group is None:
                raise KraftError("GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
            if group.members:
                raise KraftError("NON_EMPTY_GROUP", f"group {group_id!r} has {len(group.members)} active members")
            tombstones: list[tuple[bytes, bytes | None]] = [
                (offset_key(group_id, t, p), None) for t, p in sorted(group.offsets)]
            await self._append(state.partition, tombstones + [(group_key(group_id), None)])
            del state.groups[group_id]
        return DeleteGroupResult(group_id)

    async def delete_offsets(self, group_id: str,
                             topics: list[tuple[str, tuple[int, ...] | None]]) -> DeleteOffsetsResult:
        """kafka-consumer-groups --delete-offsets (Kafka's OffsetDelete): drops the committed
        offsets of the topics' partitions (all of a topic's when None). A partition of a topic that
        an active member subscribes to answers GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset."""
        state = await self._state(group_id, create=False)
        async with state.lock:
            group = state.groups.get(group_id)
            if group is None:
                raise KraftError("GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
            subscribed = {t for m in group.members.values() for t in m.subscribed_topics}
            subscribed |= {t for m in group.members.values() for t, _ in m.assigned}
            results, dropped = [], []
            for topic, partitions in topics:
                t = self.image.topic_by_name(topic)
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
                        dropped.append((topic, p))
                    results.append(entry)
            if dropped:
                await self._append(state.partition, [(offset_key(group_id, t, p), None) for t, p in dropped])
                for tp in dropped:
                    group.offsets.pop(tp, None)
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
        state = await self._state(group_id)
        async with state.lock:
            group = state.groups.get(group_id) or ConsumerGroup(group_id, self.settings.group)
            if group.members:
                raise KraftError("NON_EMPTY_GROUP", f"assignments can only be reset if group {group_id!r} is "
                                 f"inactive, but the current state is {group.state}")
            targets = await asyncio.gather(*(self._reset_target(group, tp, reset) for tp in tps))
            new_offsets = dict(zip(tps, targets))
            previous = {tp: group.offsets.get(tp) for tp in tps}
            if not reset.dry_run:
                await self._commit(state, group, {tp: (o, "") for tp, o in new_offsets.items()})
        return ResetOffsetsResult(group_id, reset.dry_run, tuple(
            ResetOffset(t, p, new_offsets[(t, p)], None if previous[(t, p)] is None else previous[(t, p)].offset)
            for t, p in tps
        ))

    async def _reset_target(self, group: ConsumerGroup, tp: tuple[str, int], reset: OffsetReset) -> int:
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
            committed = group.offsets.get(tp)
            if committed is None:
                raise KraftError("INVALID_REQUEST", f"cannot shift the offset of {tp[0]}-{tp[1]}: "
                                 "the group has no committed offset for it")
            target = committed.offset + reset.value
        return min(max(target, start), end)

    # -- session timeouts ---------------------------------------------------------------------

    @staticmethod
    async def _every(interval_ms: int, work: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await work()
            except Exception:
                log.exception("%s failed", work.__name__)

    async def tick(self) -> None:
        """Expires members whose session timed out and records the new membership."""
        now = self.clock()
        topics = self._topic_counts()
        for state in list(self._partitions.values()):
            if not state.loaded.is_set():
                continue
            for group_id, group in list(state.groups.items()):
                if not group.expired_members(now):
                    continue
                try:
                    expired = await self._change_group(
                        state, group_id, lambda g, regex_topics: g.expire(topics, now, regex_topics))
                except KraftError as e:
                    log.warning("expiring members of group %s: %s", group_id, e)
                    continue
                if expired:
                    log.info("group %s: removed %s after session timeout", group_id, ", ".join(expired))

    # -- offset retention ---------------------------------------------------------------------

    async def expire_offsets(self) -> int:
        """Kafka's cleanupGroupMetadata: per loaded partition, under its lock, appends tombstones
        for the offsets that expired (`expiration.py`) and for the groups left with neither
        members nor offsets, then drops them from the cache; a failed append drops nothing (the
        next check tries again). Returns how many offsets were removed."""
        started = time.monotonic()
        removed = 0
        for state in list(self._partitions.values()):
            if not state.loaded.is_set():
                continue
            async with state.lock:
                if self._partitions.get(state.partition) is not state:
                    continue  # resigned while waiting for the lock
                now = self.clock()
                expired = {gid: tps for gid, g in state.groups.items()
                           if (tps := expired_offsets(g, now, self.settings.offsets_retention_ms))}
                if not expired:
                    continue
                gone = [gid for gid, tps in expired.items() if removes_group(state.groups[gid], tps)]
                records: list[tuple[bytes, bytes | None]] = [
                    (offset_key(gid, t, p), None) for gid, tps in expired.items() for t, p in tps]
                records += [(group_key(gid), None) for gid in gone]
                try:
                    await self._append(state.partition, records)
                except KraftError as e:
                    log.warning("expiring offsets in %s-%d: %s", OFFSETS_TOPIC, state.partition, e)
                    continue
                for gid, tps in expired.items():
                    for tp in tps:
                        del state.groups[gid].offsets[tp]
                for gid in gone:
                    del state.groups[gid]
                removed += sum(len(tps) for tps in expired.values())
        if removed:
            log.info("Removed %d expired offsets in %d milliseconds.", removed,
                     (time.monotonic() - started) * 1000)
        return removed

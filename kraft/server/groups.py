"""The group coordinator's interface (`GroupService`, implemented by
`kraft/broker/groups/coordinator.py`) and its typed requests and answers: the KIP-848
ConsumerGroupHeartbeat, offset commit / fetch / delete / reset, list, describe and delete groups,
find the coordinator. Listeners encode the answers in their own wire shapes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from kraft.broker.groups.classic import JoinRequest, JoinResult
from kraft.errors import KraftError

# subscribed_topic_regex: longer is INVALID_REGULAR_EXPRESSION from the coordinator (Kafka sets no
# bound; this one keeps what a member makes every coordinator compile and store small)
MAX_REGEX_LENGTH = 1024


@dataclass(frozen=True)
class GroupHeartbeat:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: frozenset[tuple[str, int]] | None
    rebalance_timeout_ms: int
    principal: str = ""  # with client_host, whose Describe rights a regex subscription resolves with


@dataclass(frozen=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    metadata: str


@dataclass(frozen=True)
class OffsetReset:
    topics: tuple[str, ...]
    partitions: tuple[int, ...] | None  # None: every partition of the topics
    strategy: str  # earliest, latest, offset, datetime or shift
    value: int | None  # offset, timestamp ms or shift
    dry_run: bool


@dataclass(frozen=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]


def by_topic(tps: frozenset[tuple[str, int]] | set[tuple[str, int]] | tuple[tuple[str, int], ...]
             ) -> tuple[TopicPartitions, ...]:
    """Partitions grouped by topic, both sorted."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        grouped.setdefault(topic, []).append(partition)
    return tuple(TopicPartitions(t, tuple(ps)) for t, ps in grouped.items())


@dataclass(frozen=True)
class FindCoordinatorResult:
    group_id: str
    partition: int  # of __consumer_offsets
    coordinator: NodeEndpoint


@dataclass(frozen=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    error_code: str | None = None  # not committed: e.g. TOPIC_AUTHORIZATION_FAILED for its topic


@dataclass(frozen=True)
class CommitOffsetsResult:
    offsets: tuple[CommittedOffset, ...]


async def commit_per_partition(
    offsets: list[OffsetCommitEntry], own_error: Callable[[OffsetCommitEntry], str | None],
    commit: Callable[[list[OffsetCommitEntry]], Awaitable[CommitOffsetsResult]],
) -> CommitOffsetsResult:
    """Kafka's OffsetCommit and TxnOffsetCommit rule (KafkaApis checks the topics before the
    group): an entry with its `own_error` (an unknown partition, a topic the principal may not
    Read) answers it and is not committed; `commit` takes the others (none: not called). Its
    refusal (the group's error) answers each of them, and is raised when no entry had its own."""
    own = [(e, code) for e in offsets if (code := own_error(e)) is not None]
    failed = tuple(CommittedOffset(e.topic, e.partition, e.offset, code) for e, code in own)
    rest = [e for e in offsets if own_error(e) is None]
    if not rest:
        return CommitOffsetsResult(failed)
    try:
        committed = (await commit(rest)).offsets
    except KraftError as e:
        if not failed:
            raise
        committed = tuple(CommittedOffset(x.topic, x.partition, x.offset, e.error_code) for x in rest)
    return CommitOffsetsResult(committed + failed)


@dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True)
class FetchOffsetsResult:
    group_id: str
    offsets: tuple[GroupOffset, ...]
    # partitions whose transactional offset commit waits for its transaction's end (KIP-447:
    # a read_committed consumer's OffsetFetch with require_stable answers them UNSTABLE_OFFSET_COMMIT)
    unstable: tuple[tuple[str, int], ...] = ()
    # topics named in the fetch that the principal may not Describe (Kafka answers their
    # partitions TOPIC_AUTHORIZATION_FAILED); a fetch of all offsets leaves such topics out
    refused: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    members: int
    coordinator: int
    group_type: str = "consumer"  # Kafka's: "consumer" (KIP-848) or "classic"


@dataclass(frozen=True)
class ListGroupsResult:
    groups: tuple[GroupSummary, ...]


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    member_epoch: int
    client_id: str
    host: str
    subscribed_topics: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[TopicPartitions, ...]
    pending_revocation: tuple[TopicPartitions, ...]
    target_assignment: tuple[TopicPartitions, ...]
    group_instance_id: str | None = None  # a classic group's static member

    def topics(self) -> set[str]:
        """The topics the member subscribes to, owns, or is to own."""
        owned = (*self.assignment, *self.pending_revocation, *self.target_assignment)
        return {*self.subscribed_topics, *(entry.topic for entry in owned)}


@dataclass(frozen=True)
class OffsetLag:
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None  # the leader's high watermark
    lag: int | None
    member_id: str | None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    assignor: str
    group_epoch: int
    assignment_epoch: int
    coordinator: NodeEndpoint | None
    members: tuple[MemberDescription, ...]
    offsets: tuple[OffsetLag, ...]
    group_type: str = "consumer"  # a classic group: assignor is its protocol, the epochs its generation


@dataclass(frozen=True)
class ClassicMemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # its protocol metadata (a consumer's subscription)
    assignment: bytes  # what the leader assigned it


@dataclass(frozen=True)
class ClassicDescription:
    """Kafka's DescribeGroups answer for one group: a classic group's members' metadata and
    assignments (while Stable), a KIP-848 group's in the consumer protocol's encoding; `Dead` for
    a group that does not exist."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the protocol (assignor) the members chose
    members: tuple[ClassicMemberDescription, ...]


@dataclass(frozen=True)
class DeleteGroupResult:
    group_id: str


@dataclass(frozen=True)
class DeletedOffset:
    topic: str
    partition: int
    error_code: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class DeleteOffsetsResult:
    group_id: str
    partitions: tuple[DeletedOffset, ...]


@dataclass(frozen=True)
class ResetOffset:
    topic: str
    partition: int
    new_offset: int
    previous_offset: int | None


@dataclass(frozen=True)
class ResetOffsetsResult:
    group_id: str
    dry_run: bool
    offsets: tuple[ResetOffset, ...]


class GroupService(Protocol):
    async def find_coordinator(self, group_id: str) -> FindCoordinatorResult: ...

    async def heartbeat(self, group_id: str, request: GroupHeartbeat) -> HeartbeatResult: ...

    async def commit_offsets(
        self, group_id: str, member_id: str, member_epoch: int, offsets: list[OffsetCommitEntry],
        group_instance_id: str | None = None,
    ) -> CommitOffsetsResult: ...

    async def fetch_offsets(self, group_id: str, topics: list[str] | None) -> FetchOffsetsResult: ...

    async def list_groups(self) -> ListGroupsResult: ...

    async def describe_group(self, group_id: str) -> GroupDescription: ...

    async def describe_classic(self, group_id: str) -> ClassicDescription: ...

    async def join_group(self, group_id: str, request: JoinRequest) -> JoinResult: ...

    async def sync_group(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> bytes: ...

    async def classic_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                                generation_id: int) -> None: ...

    async def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> list[str | None]: ...

    async def delete_group(self, group_id: str) -> DeleteGroupResult: ...

    async def reset_offsets(self, group_id: str, reset: OffsetReset) -> ResetOffsetsResult: ...

    async def delete_offsets(
        self, group_id: str, topics: list[tuple[str, tuple[int, ...] | None]]
    ) -> DeleteOffsetsResult: ...

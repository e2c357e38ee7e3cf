"""Consumer groups (KIP-848): heartbeat, offset commit, fetch, reset and delete, list, describe,
find the coordinator. The answers are built by the group coordinator
(`kraft.broker.groups.coordinator`) in these shapes."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from msgspec import Meta

from kraft.api.errors import invalid_request
from kraft.server.groups import MAX_REGEX_LENGTH
from kraft.api.messages.common import (
    INT32_MAX, INT64_MAX, TOPIC_LIST_PATTERN, Epoch, Message, Node, NonNegativeInt64, PartitionNumber, TopicName,
    check_topic_name,
)

MAX_ITEMS = 10_000  # partitions per commit / owned list: bounds one request
MAX_TOPICS = 1000
MAX_METADATA = 4096  # Kafka's offset.metadata.max.bytes
Strategy = Literal["earliest", "latest", "offset", "datetime", "shift"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)

PartitionNumbers = Annotated[list[PartitionNumber], Meta(max_length=MAX_ITEMS)]


class TopicPartitions(Message):
    topic: TopicName
    partitions: PartitionNumbers

    def __post_init__(self) -> None:
        check_topic_name(self.topic)


class AssignedPartitions(Message):
    topic: str
    partitions: list[int]


class HeartbeatRequest(Message):
    """Join with member_epoch 0, heartbeat with the current epoch, leave with -1."""

    member_id: Annotated[str, Meta(max_length=255)] = ""
    member_epoch: Epoch
    client_id: str = ""
    subscribed_topics: Annotated[list[TopicName], Meta(max_length=MAX_ITEMS)] | None = None
    subscribed_topic_regex: Annotated[str, Meta(
        description="RE2 syntax, matched against whole topic names", extra_json_schema={"maxLength": MAX_REGEX_LENGTH},
    )] | None = None
    server_assignor: Annotated[str, Meta(extra_json_schema={"enum": ["range", "uniform"]})] | None = None
    owned_partitions: Annotated[list[TopicPartitions], Meta(max_length=MAX_ITEMS)] | None = None
    rebalance_timeout_ms: Annotated[int, Meta(ge=1, le=INT32_MAX)] = 300_000

    def __post_init__(self) -> None:
        for topic in self.subscribed_topics or ():
            check_topic_name(topic)
        owned = sum(len(entry.partitions) for entry in self.owned_partitions or ())
        if owned > MAX_ITEMS:
            raise invalid_request(f"$.owned_partitions names {owned} partitions, at most {MAX_ITEMS}")


class HeartbeatResponse(Message):
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: list[AssignedPartitions]


class OffsetCommit(Message):
    topic: TopicName
    partition: PartitionNumber
    offset: NonNegativeInt64
    metadata: Annotated[str, Meta(max_length=MAX_METADATA)] = ""

    def __post_init__(self) -> None:
        check_topic_name(self.topic)


class CommitOffsetsRequest(Message):
    """Members send their id and epoch; a tool committing for an empty group sends neither."""

    member_id: str = ""
    member_epoch: Epoch = -1
    offsets: Annotated[list[OffsetCommit], Meta(max_length=MAX_ITEMS)]


class CommittedOffset(Message):
    topic: str
    partition: int
    offset: int
    error_code: Annotated[str | None, Meta(description="set when this offset was not committed (Kafka's "
                                                       "per-partition error: TOPIC_AUTHORIZATION_FAILED for a topic "
                                                       "the principal may not Read)")] = None


class CommitOffsetsResponse(Message):
    offsets: list[CommittedOffset]


class FetchOffsetsQuery(Message):
    topics: Annotated[str | None, Meta(description="comma-separated topic names",
                                       extra_json_schema={"pattern": TOPIC_LIST_PATTERN})] = None


class GroupOffset(Message):
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp: int


class FetchOffsetsResponse(Message):
    group_id: str
    offsets: list[GroupOffset]


class ResetOffsetsRequest(Message):
    """Kafka's kafka-consumer-groups --reset-offsets, for a group without members."""

    topics: Annotated[list[TopicName], Meta(min_length=1, max_length=MAX_TOPICS)]
    partitions: PartitionNumbers | None = None
    strategy: Strategy
    value: Annotated[int, Meta(ge=-INT64_MAX, le=INT64_MAX, description=(
        "offset (offset, >= 0), timestamp ms (datetime, >= 0) or shift; required by those"))] | None = None
    dry_run: bool = True

    def __post_init__(self) -> None:
        for topic in self.topics:
            check_topic_name(topic)
        if self.strategy in ("offset", "datetime", "shift"):
            if self.value is None:
                raise invalid_request(f"Object missing required field `value` (strategy {self.strategy})")
            if self.strategy != "shift" and self.value < 0:
                raise invalid_request("Expected `int` >= 0 - at `$.value`")


class ResetOffset(Message):
    topic: str
    partition: int
    new_offset: int
    previous_offset: int | None


class ResetOffsetsResponse(Message):
    group_id: str
    dry_run: bool
    offsets: list[ResetOffset]


class TopicOffsetsToDelete(Message):
    """Every partition of the topic when `partitions` is absent."""

    topic: TopicName
    partitions: PartitionNumbers | None = None

    def __post_init__(self) -> None:
        check_topic_name(self.topic)


class DeleteOffsetsRequest(Message):
    topics: Annotated[list[TopicOffsetsToDelete], Meta(min_length=1, max_length=MAX_TOPICS)]


class DeletedOffset(Message):
    topic: str
    partition: int
    error_code: str | None = None
    message: str | None = None


class DeleteOffsetsResponse(Message):
    group_id: str
    partitions: list[DeletedOffset]


class GroupSummary(Message):
    group_id: str
    state: str
    protocol_type: str
    members: int
    coordinator: int
    group_type: Literal["consumer", "classic"] = "consumer"


class ListGroupsResponse(Message):
    groups: list[GroupSummary]


class MemberDescription(Message):
    """A classic group's member: `member_epoch` is the group's generation, the subscription and
    assignment are read from its consumer protocol metadata, `group_instance_id` its static
    membership's instance."""

    member_id: str
    member_epoch: int
    client_id: str
    host: str
    subscribed_topics: list[str]
    subscribed_topic_regex: str | None
    assignment: list[AssignedPartitions]
    pending_revocation: list[AssignedPartitions]
    target_assignment: list[AssignedPartitions]
    group_instance_id: str | None = None


class OffsetLag(Message):
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    member_id: str | None


class DescribeGroupResponse(Message):
    group_id: str
    # KIP-848 groups: Empty, Assigning, Reconciling, Stable; classic groups: Empty,
    # PreparingRebalance, CompletingRebalance, Stable
    state: Literal["Empty", "Assigning", "Reconciling", "Stable", "PreparingRebalance", "CompletingRebalance"]
    protocol_type: str
    assignor: str  # a classic group's: the protocol its members chose
    group_epoch: int  # a classic group's: its generation
    assignment_epoch: int
    coordinator: Node | None
    members: list[MemberDescription]
    offsets: list[OffsetLag]
    group_type: Literal["consumer", "classic"] = "consumer"  # Kafka's: KIP-848 or the classic protocol


class DeleteGroupResponse(Message):
    group_id: str


class FindCoordinatorResponse(Message):
    group_id: str
    partition: int
    coordinator: Node

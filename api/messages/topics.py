"""Topic administration and metadata (Kafka's CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, IncrementalAlterConfigs and Metadata), as the public routes and the
controller's forwarded ones carry them."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from msgspec import Meta

from kraft.api.messages.common import (
    PARTITION_COUNT, REPLICATION_FACTOR, BrokerIds, ConfigChanges, Configs, KafkaRange, Message, PartitionCount,
    ReplicationFactor, RequestId, TOPIC_LIST_PATTERN, TopicName, check_topic_name,
)

# -- shapes shared by several answers ---------------------------------------------------------------


class PartitionState(Message):
    """A partition's leadership: leader -1 while it has none."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


class TopicMetadata(Message):
    name: str
    topic_id: str
    internal: bool
    partitions: list[PartitionState]


class TopicError(Message):
    """Why a topic named in the request is not in the answer."""

    name: str
    error_code: str
    message: str
    retriable: bool


class Broker(Message):
    node_id: int
    host: str
    port: int
    rack: str | None


class MetadataQuery(Message):
    topics: Annotated[str | None, Meta(description="comma-separated topic names",
                                       extra_json_schema={"pattern": TOPIC_LIST_PATTERN})] = None
    allow_auto_topic_creation: Annotated[bool, Meta(
        description="create a named topic that does not exist (when auto.create.topics.enable), "
                    "as produce does")] = False


class MetadataResponse(Message):
    cluster_id: str
    controller_id: int
    brokers: list[Broker]
    topics: list[TopicMetadata]
    topic_errors: list[TopicError]


# -- create, list, describe, delete ------------------------------------------------------------------


class CreateTopicRequest(Message):
    """Absent partitions and replication_factor take the broker defaults."""

    PARTITIONS: ClassVar[KafkaRange] = PARTITION_COUNT
    name: TopicName
    partitions: PartitionCount | None = None
    replication_factor: ReplicationFactor | None = None
    configs: Configs = {}

    def __post_init__(self) -> None:
        check_topic_name(self.name)
        self.PARTITIONS.check(self.partitions, "partitions")
        REPLICATION_FACTOR.check(self.replication_factor, "replication_factor")


class CreateTopicResponse(Message):
    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


class TopicSummary(Message):
    name: str
    topic_id: str
    internal: bool
    partitions: int


class ListTopicsResponse(Message):
    topics: list[TopicSummary]


class DescribeTopicResponse(Message):
    name: str
    topic_id: str
    internal: bool
    configs: dict[str, str]
    partitions: list[PartitionState]


class DeleteTopicResponse(Message):
    name: str


class CreatePartitionsRequest(Message):
    """Raise the partition count to `count` (never lower)."""

    count: PartitionCount

    def __post_init__(self) -> None:
        PARTITION_COUNT.check(self.count, "count")


class CreatePartitionsResponse(Message):
    name: str
    partitions: int


class TopicConfigsResponse(Message):
    """The topic's overrides and the broker defaults they override."""

    configs: dict[str, str]
    defaults: dict[str, str]


class AlterConfigsRequest(Message):
    configs: ConfigChanges


class AlterConfigsResponse(Message):
    configs: dict[str, str]


# -- the controller's routes, which other nodes forward these to ----------------------------------

# A controller takes larger topics than the public routes create (benchmarks build them directly).
CONTROLLER_PARTITION_COUNT = KafkaRange(1, 100_000, "INVALID_PARTITIONS", "partitions of the topic")
ControllerPartitionCount = Annotated[int, CONTROLLER_PARTITION_COUNT.meta]


class ControllerCreateTopicRequest(CreateTopicRequest):
    PARTITIONS: ClassVar[KafkaRange] = CONTROLLER_PARTITION_COUNT
    partitions: ControllerPartitionCount | None = None
    # a manual replica assignment: partition i's replicas at i (CreateTopics' assignments)
    assignments: Annotated[list[BrokerIds], Meta(max_length=CONTROLLER_PARTITION_COUNT.maximum)] | None = None
    validate_only: bool = False
    request_id: RequestId | None = None


class ControllerCreateTopicResponse(CreateTopicResponse):
    metadata_offset: int


class ControllerDeleteTopicRequest(Message):
    name: TopicName
    request_id: RequestId | None = None

    def __post_init__(self) -> None:
        check_topic_name(self.name)


class ControllerDeleteTopicResponse(Message):
    name: str
    topic_id: str
    metadata_offset: int


class ControllerCreatePartitionsRequest(Message):
    name: TopicName
    count: ControllerPartitionCount
    validate_only: bool = False
    request_id: RequestId | None = None

    def __post_init__(self) -> None:
        check_topic_name(self.name)
        CONTROLLER_PARTITION_COUNT.check(self.count, "count")


class ControllerCreatePartitionsResponse(CreatePartitionsResponse):
    metadata_offset: int


class ControllerAlterConfigsRequest(Message):
    resource_type: Literal["topic"] = "topic"
    resource_name: TopicName
    configs: ConfigChanges
    validate_only: bool = False
    request_id: RequestId | None = None

    def __post_init__(self) -> None:
        check_topic_name(self.resource_name)


class ControllerAlterConfigsResponse(AlterConfigsResponse):
    metadata_offset: int

"""The controller's own RPCs (`/v1/controller/...`, KRaft's): broker registration, heartbeats and
unregistration, producer-id blocks, AlterPartition, the metadata log for observers, quorum
status, preferred leader elections and partition reassignments (KIP-455). The answers are built
by the controller (`kraft.controller`) in these shapes; a write's answer carries the offset it was
committed at. Topic, config, ACL, quota and SCRAM changes that nodes forward are in
`topics.py` and `security.py`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from kraft.api.messages.common import (
    INT64_MAX, BrokerEpoch, BrokerId, BrokerIds, Committed, Message, Node, NonNegativeInt32, PartitionNumber,
    RequestId, TopicName, check_topic_name,
)

MAX_FETCH_RECORDS = 10_000
MAX_FETCH_WAIT_MS = 1_000
MAX_ELECTION_PARTITIONS = 100_000
MAX_REASSIGNMENTS = 100_000

# -- status and the metadata log ------------------------------------------------------------------


class ReplicaState(Message):
    node_id: int
    log_end_offset: int
    lag: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    status: Literal["Leader", "Follower", "Observer"]


class DescribeQuorumResponse(Message):
    """kafka-metadata-quorum describe --status and --replication in one answer."""

    cluster_id: str
    leader_id: int
    leader_epoch: int
    controller_epoch: int | None = None
    high_watermark: int
    max_follower_lag: int
    max_follower_lag_time_ms: int
    current_voters: list[int]
    current_observers: list[int]
    replication: list[ReplicaState]


class LocalQuorumStatus(Message):
    node_id: int
    metadata_offset: int
    active: bool
    controller_id: int
    controller_epoch: int | None = None
    raft: dict[str, Any] | None = None


class MetadataLogQuery(Message):
    broker_id: Annotated[BrokerId | None, Meta(description="the fetching broker (an observer)")] = None
    from_offset: Annotated[int, Meta(ge=0, le=INT64_MAX)] = 0
    max_records: Annotated[int, Meta(ge=1, le=MAX_FETCH_RECORDS)] = 1000
    max_wait_ms: Annotated[int, Meta(ge=0, le=MAX_FETCH_WAIT_MS)] = 0


class MetadataLogResponse(Message):
    """Committed records from the offset, or `snapshot_needed` when they were cleaned: load
    `GET /v1/controller/snapshot` first."""

    cluster_id: str | None = None
    leader: Node | None = None
    controllers: list[Node] | None = None
    snapshot_needed: bool
    first_available: int | None = None
    high_watermark: int
    records: Annotated[list[tuple[int, dict[str, Any]]], Meta(description="[offset, record]")]


# -- brokers ----------------------------------------------------------------------------------------


class Endpoint(Message):
    name: Annotated[str, Meta(max_length=64)] = "HTTP"
    host: Annotated[str, Meta(min_length=1, max_length=255)]
    port: Annotated[int, Meta(ge=1, le=65535)]
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"


class RegisterBrokerRequest(Message):
    broker_id: BrokerId
    incarnation_id: Annotated[str, Meta(min_length=1, max_length=64)]
    endpoints: Annotated[list[Endpoint], Meta(min_length=1, max_length=16)]
    rack: Annotated[str, Meta(max_length=255)] | None = None
    cluster_id: str | None = None
    request_id: RequestId | None = None


class RegisterBrokerResponse(Committed):
    broker_id: int
    broker_epoch: int


class BrokerHeartbeatRequest(Message):
    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    current_metadata_offset: Annotated[int, Meta(ge=-1, le=INT64_MAX)]
    want_fence: bool = False
    want_shutdown: bool = False
    # KIP-858's OfflineLogDirs (directory ids), and the replicas on them: the controller moves
    # their leaderships and ISR memberships to other brokers
    offline_log_dirs: Annotated[list[Annotated[str, Meta(max_length=64)]], Meta(max_length=1000)] = []
    offline_replicas: Annotated[list[tuple[TopicName, PartitionNumber]], Meta(
        max_length=MAX_REASSIGNMENTS, description="[topic, partition] of each")] = []

    def __post_init__(self) -> None:
        for topic, _ in self.offline_replicas:
            check_topic_name(topic)


class BrokerHeartbeatResponse(Message):
    broker_id: int
    broker_epoch: int
    is_caught_up: bool
    is_fenced: bool
    should_shutdown: bool
    metadata_offset: int | None = None


class UnregisterBrokerRequest(Message):
    broker_id: BrokerId
    request_id: RequestId | None = None


class UnregisterBrokerResponse(Committed):
    broker_id: int


class AllocateProducerIdsRequest(Message):
    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    request_id: RequestId | None = None


class AllocateProducerIdsResponse(Committed):
    producer_id_start: int
    producer_id_len: int


class IsrMember(Message):
    """KIP-903's BrokerState: an ISR member and the broker epoch of the process whose position
    the leader counted (-1: not known, allowed for a member already in the ISR)."""

    broker_id: BrokerId
    broker_epoch: BrokerEpoch = -1


class AlterPartitionRequest(Message):
    """An ISR change from the partition's leader (Kafka's AlterPartition v3: `new_isr_with_epochs`)."""

    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    topic: TopicName
    partition: PartitionNumber
    leader_epoch: NonNegativeInt32
    partition_epoch: NonNegativeInt32
    new_isr_with_epochs: Annotated[list[IsrMember], Meta(max_length=1000)]
    request_id: RequestId | None = None

    def __post_init__(self) -> None:
        check_topic_name(self.topic)


class PartitionStateResponse(Message):
    topic: str
    topic_id: str | None = None
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    metadata_offset: int | None = None


# -- elections and reassignments ----------------------------------------------------------------------


class ElectLeadersRequest(Message):
    election_type: Literal["preferred"] = "preferred"
    partitions: Annotated[list[tuple[TopicName, PartitionNumber]], Meta(
        max_length=MAX_ELECTION_PARTITIONS,
        description="[topic, partition] pairs; null: every partition")] | None = None
    request_id: RequestId | None = None

    def __post_init__(self) -> None:
        for topic, _ in self.partitions or ():
            check_topic_name(topic)


class ElectionResult(Message):
    topic: str
    partition: int
    leader: int | None = None
    error_code: str | None = None
    message: str | None = None


class ElectLeadersResponse(Committed):
    partitions: list[ElectionResult]


class Reassignment(Message):
    topic: TopicName
    partition: PartitionNumber
    replicas: Annotated[BrokerIds | None, Meta(description="the target replicas; null cancels")]

    def __post_init__(self) -> None:
        check_topic_name(self.topic)


class AlterReassignmentsRequest(Message):
    """All or none: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT or
    NO_REASSIGNMENT_IN_PROGRESS refuse the whole plan."""

    partitions: Annotated[list[Reassignment], Meta(max_length=MAX_REASSIGNMENTS)]
    request_id: RequestId | None = None


class ReassignmentState(Message):
    topic: str
    partition: int
    replicas: Annotated[list[int], Meta(description="the target, then the replicas still leaving")]
    adding_replicas: list[int]
    removing_replicas: list[int]


class ListReassignmentsResponse(Message):
    partitions: list[ReassignmentState]


class AlterReassignmentsResponse(ListReassignmentsResponse):
    metadata_offset: int

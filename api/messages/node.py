"""A node's own answers: what it is (`GET /`), its health and readiness, and producer ids for
idempotent producers (Kafka's InitProducerId)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from kraft.api.messages.common import Message

MAX_TRANSACTIONAL_ID_CHARS = 1024


class RootResponse(Message):
    """`GET /`: what answers here, and where to go next (paths on this node)."""

    name: Literal["kraft"]
    version: str
    node_id: int
    docs: Annotated[str, Meta(description="the API, browsable (Swagger UI)")]
    openapi: Annotated[str, Meta(description="the OpenAPI document of every route")]
    health: Annotated[str, Meta(description="liveness; ?ready=true for readiness")]
    metadata: Annotated[str, Meta(description="brokers, controller and topics")]
    metrics: Annotated[str, Meta(description="Prometheus metrics")]


class HealthQuery(Message):
    ready: Annotated[bool, Meta(description="true: answer 503 until the node is ready (a readiness probe)")] = False


class HealthResponse(Message):
    """With `?ready=true`, a node that is not ready answers 503 with this body: `status` `not_ready`,
    `ready` false and the `reason` (for a readiness probe, or a script that waits before creating
    topics)."""

    status: Literal["ok", "not_ready"]
    node_id: int
    roles: list[str]
    features: Annotated[list[Literal["idempotence"]], Meta(description="optional features this node supports")]
    ready: Annotated[bool, Meta(description="caught up with the metadata log, knows the active controller, "
                                            "and (a broker) registered and unfenced")]
    cluster_id: str | None = None
    active_controller: Annotated[bool | None, Meta(description="this node is the active controller")] = None
    controller_id: Annotated[int | None, Meta(
        description="the active controller as this node knows it (-1: unknown)")] = None
    metadata_offset: Annotated[int | None, Meta(description="last metadata offset applied here")] = None
    broker_state: Annotated[Literal["NOT_RUNNING", "STARTING", "RECOVERY", "RUNNING", "PENDING_CONTROLLED_SHUTDOWN",
                                    "SHUTTING_DOWN"] | None, Meta(description="Kafka's broker state")] = None
    metadata_log_error: Annotated[str | None, Meta(
        description="why this node's metadata log cannot be written now (e.g. a full disk); null while it can")] = None
    reason: Annotated[str | None, Meta(description="why the node is not ready (only when it is not)")] = None


class InitProducerIdRequest(Message):
    transactional_id: Annotated[str, Meta(
        min_length=1, max_length=MAX_TRANSACTIONAL_ID_CHARS,
        description="derive the id from this name (stateless, the same on every broker)")] | None = None


class InitProducerIdResponse(Message):
    producer_id: int
    producer_epoch: Annotated[int, Meta(ge=0, le=32767)]


class LogDirsQuery(Message):
    topics: Annotated[str | None, Meta(description="comma-separated topics: only their partitions "
                                                   "(default: every partition)")] = None


class LogDirPartition(Message):
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool = False


class LogDirDescription(Message):
    log_dir: str
    error: str | None = None  # KAFKA_STORAGE_ERROR: the directory is offline
    partitions: list[LogDirPartition] = []


class LogDirsResponse(Message):
    """This broker's log directories and the partitions each holds (Kafka's DescribeLogDirs):
    `size` in bytes, `offset_lag` the high watermark's lead over the log end (0 in sync).
    An offline directory answers `error` KAFKA_STORAGE_ERROR and no partitions."""

    broker: int
    log_dirs: list[LogDirDescription]


class TraceQuery(Message):
    after: Annotated[int, Meta(ge=0, description="answer the events after this sequence number "
                                                 "(the `next` of the previous answer)")] = 0


class TraceResponse(Message):
    """The stage events this node kept (`stage.trace.events`, 0: off), oldest first; each is
    [seq, time_ns, stage, topic, partition, offset, replica]: `stage` reached `offset` (exclusive)
    of the partition at wall-clock `time_ns`; `replica` is the follower for the follower stages,
    -1 else (docs/benchmarks.md, kraft-bench --trace)."""

    node_id: int
    enabled: bool
    next: Annotated[int, Meta(description="the sequence number to ask `after` next")]
    events: list[tuple[int, int, str, str, int, int, int]]

"""Field types every message family shares: Kafka's integer widths, the topic name (its rule taken
from `kraft.metadata.topic_name`, stated here once for every schema), configs, acks, request ids,
the node address and the error answer.

A constraint that Kafka answers with its own error code (INVALID_TOPIC_EXCEPTION for a name,
INVALID_PARTITIONS for a partition count of 0, INVALID_REQUIRED_ACKS) is stated in the schema
only, and checked in the message's `__post_init__`, which raises that code: the schema and the
check come from the same definition. Every other constraint is msgspec's own (`Meta(ge=, le=)`),
refused while decoding as INVALID_REQUEST naming the field path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from kraft.api.errors import KraftError
from kraft.log.config import COMPRESSION_TYPES, TOPIC_CONFIG_KEYS
from kraft.metadata import topic_name
from kraft.server.metadata import check_topic_name

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class _MessageMeta(msgspec.StructMeta):
    """Every message's fields are keyword-only (msgspec applies `kw_only` to one class's own fields
    only), so a field with a default may come before a required one, in the order the API reads."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **config: Any) -> Any:
        config.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **config)


class Message(msgspec.Struct, metaclass=_MessageMeta, omit_defaults=True):
    """The base of every message: fields by name only; an answer leaves out a field that holds its
    default."""


READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
IsolationLevel = Annotated[Literal["read_uncommitted", "read_committed"], Meta(description=(
    "Kafka's isolation.level: read_committed reads stop at the last stable offset and leave out "
    "aborted transactions' records; read_uncommitted (the default) reads up to the high watermark. "
    "Transaction markers (control records) never reach a reader"))]

Int32 = Annotated[int, Meta(ge=-(2**31), le=INT32_MAX)]
Int64 = Annotated[int, Meta(ge=-(2**63), le=INT64_MAX)]
NonNegativeInt32 = Annotated[int, Meta(ge=0, le=INT32_MAX)]
NonNegativeInt64 = Annotated[int, Meta(ge=0, le=INT64_MAX)]
PartitionNumber = Annotated[int, Meta(ge=0, le=INT32_MAX, description="a partition of the topic")]
BrokerId = Annotated[int, Meta(ge=0, le=INT32_MAX, description="a broker's node.id")]
BrokerEpoch = Annotated[int, Meta(ge=-1, le=INT64_MAX, description="the broker epoch its registration got")]
Epoch = Annotated[int, Meta(ge=-1, le=INT32_MAX)]
TimeoutMs = Annotated[int, Meta(ge=0, le=300_000)]
BrokerIds = Annotated[list[BrokerId], Meta(max_length=1000)]
RequestId = Annotated[str, Meta(min_length=1, max_length=256,
                                description="retries with the same id are applied once")]


@dataclass(frozen=True)
class KafkaRange:
    """An integer range that Kafka enforces with its own error code: the schema states the range
    (`meta`), the message's `__post_init__` calls `check`."""

    minimum: int
    maximum: int
    error_code: str
    description: str = ""

    @property
    def meta(self) -> Meta:
        return Meta(description=self.description or None,
                    extra_json_schema={"minimum": self.minimum, "maximum": self.maximum})

    def check(self, value: int | None, field: str) -> None:
        if value is not None and not self.minimum <= value <= self.maximum:
            raise KraftError(self.error_code, f"Expected `int` in [{self.minimum}, {self.maximum}], "
                                              f"got {value} - at `$.{field}`")


MAX_PARTITIONS = 10_000  # per topic created or grown through the public routes
PARTITION_COUNT = KafkaRange(1, MAX_PARTITIONS, "INVALID_PARTITIONS", "partitions of the topic")
REPLICATION_FACTOR = KafkaRange(1, 32767, "INVALID_REPLICATION_FACTOR", "replicas of each partition")
PartitionCount = Annotated[int, PARTITION_COUNT.meta]
ReplicationFactor = Annotated[int, REPLICATION_FACTOR.meta]

# -- names ----------------------------------------------------------------------------------------

# The legal characters of `kraft.metadata.topic_name`, anchored as JSON Schema wants it.
_LEGAL = topic_name.LEGAL_CHARACTERS.pattern
TOPIC_NAME_PATTERN = f"^{_LEGAL}$"
TOPIC_LIST_PATTERN = f"^({_LEGAL}(,{_LEGAL})*)?$"  # comma-separated
_NAME_RULE = {"pattern": TOPIC_NAME_PATTERN, "minLength": 1, "maxLength": topic_name.MAX_NAME_LENGTH}
TopicName = Annotated[str, Meta(
    description="Kafka's topic name: 1-249 of [a-zA-Z0-9._-], not '.' or '..' "
                "(else INVALID_TOPIC_EXCEPTION)",
    extra_json_schema=_NAME_RULE)]
# Group ids take the topic name's rule here (Kafka allows any string; kraft keeps them path-safe).
GroupId = Annotated[str, Meta(pattern=TOPIC_NAME_PATTERN, min_length=1, max_length=topic_name.MAX_NAME_LENGTH)]
TransactionalId = Annotated[str, Meta(min_length=1, max_length=1024)]


# -- values ---------------------------------------------------------------------------------------

Binary = Annotated[bytes, Meta(description="base64 in JSON, bin in msgpack")]

_ENUM_CONFIGS = {
    "cleanup.policy": ["delete", "compact", "compact,delete"],
    "message.timestamp.type": ["CreateTime", "LogAppendTime"],
    "compression.type": list(COMPRESSION_TYPES),
    "unclean.leader.election.enable": ["true", "false"],
}


def _known_configs(nullable: bool) -> dict[str, Any]:
    """The schema of topic config overrides: the known keys (log.config.TOPIC_CONFIG_KEYS) with
    string values. Decoding takes any key, which the controller answers with INVALID_CONFIG."""
    properties: dict[str, Any] = {}
    for key in sorted(TOPIC_CONFIG_KEYS):
        if key in _ENUM_CONFIGS:
            schema: dict[str, Any] = {"type": "string", "enum": _ENUM_CONFIGS[key]}
        else:  # 100..999999999: inside every numeric key's range (min 14, max int32 for some)
            schema = {"type": "string", "pattern": "^[1-9][0-9]{2,8}$"}
        properties[key] = {"anyOf": [schema, {"type": "null"}]} if nullable else schema
    return {"properties": properties, "propertyNames": {"enum": sorted(TOPIC_CONFIG_KEYS)}}


Configs = Annotated[dict[str, str | int | bool], Meta(
    description="topic config overrides (numbers and booleans are taken as their text)",
    extra_json_schema=_known_configs(nullable=False))]
ConfigChanges = Annotated[dict[str, str | int | bool | None], Meta(
    description="config overrides to set, or with null to delete", extra_json_schema=_known_configs(nullable=True))]


def config_strings(configs: dict[str, str | int | bool | None]) -> dict[str, str | None]:
    """Config maps carry strings: numbers and booleans as their text, null kept (a deletion)."""
    return {key: value if value is None or isinstance(value, str) else str(value).lower()
            for key, value in configs.items()}


Acks = Annotated[int, Meta(extra_json_schema={"enum": [0, 1, -1]})] | Annotated[str, Meta(
    extra_json_schema={"enum": ["all", "-1", "0", "1"]})]


def parse_acks(value: int | str) -> int:
    """Kafka's acks: 0, 1, or all (-1); anything else is INVALID_REQUIRED_ACKS."""
    if isinstance(value, str):
        value = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(value.strip().lower(), value)
    if isinstance(value, bool) or value not in (0, 1, -1):
        raise KraftError("INVALID_REQUIRED_ACKS", f"acks must be 0, 1, all or -1, got {value!r}")
    return int(value)


# -- shared answers -------------------------------------------------------------------------------


class Node(Message):
    """A node's client address."""

    node_id: int
    host: str
    port: int


class ErrorResponse(Message):
    """Every error answer: Kafka's error name, a message, whether a retry may succeed, and fields
    some errors add."""

    error_code: str
    message: str
    retriable: bool
    leader: Node | None = None  # NOT_LEADER_OR_FOLLOWER, NOT_CONTROLLER, NOT_COORDINATOR: who is
    partitions: list[dict[str, Any]] | None = None  # the JSON produce route: every partition's error


class Committed(Message):
    """An answer of the controller's write routes: the offset the change was committed at."""

    metadata_offset: int

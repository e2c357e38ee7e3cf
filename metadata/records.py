"""Metadata records: the entries of the cluster metadata log, after Kafka's `metadata/*Record.json`.

Each record is a frozen dataclass with a `type` name and a `version`; `to_dict()` gives builtins
only (msgpack/JSON friendly) and `record_from_dict()` parses one back, raising `ValueError` with a
clear reason for an unknown type or a malformed field (replay turns that into a no-op).

Every record carries `controller_epoch` (the epoch of the controller that wrote it) and
`request_id` (the client request it came from): the log's admission rule (`log_rules.admit`) drops
a stale controller's batch and a request applied before, so replay never sees them.
Lists are stored as tuples so records stay immutable.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, TypeVar, Union

NO_LEADER = -1

R = TypeVar("R", bound="MetadataRecord")


@dataclass(frozen=True)
class Endpoint:
    """A listener of a broker (Kafka's BrokerEndpoint): `name` is the listener name, "HTTP" for
    the HTTP API (always the first), else a Kafka listener's ("PLAINTEXT", "SASL_SSL", ...), and
    `security_protocol` its protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "port": self.port, "security_protocol": self.security_protocol}

    @classmethod
    def from_dict(cls, d: Any) -> "Endpoint":
        if not isinstance(d, dict):
            raise ValueError(f"endpoint must be a dict, got {type(d).__name__}")
        unknown = set(d) - {"name", "host", "port", "security_protocol"}
        if unknown:
            raise ValueError(f"endpoint has unknown fields {sorted(unknown)}")
        try:
            return cls(
                name=_coerce(d["name"], str, "endpoint.name"),
                host=_coerce(d["host"], str, "endpoint.host"),
                port=_coerce(d["port"], int, "endpoint.port"),
                security_protocol=_coerce(d.get("security_protocol", "PLAINTEXT"), str, "endpoint.security_protocol"),
            )
        except KeyError as e:
            raise ValueError(f"endpoint lacks field {e.args[0]!r}") from None


@dataclass(frozen=True, kw_only=True)
class MetadataRecord:
    """Base of all records. Subclasses set `type` (and bump `version` when their fields change)."""

    type: ClassVar[str] = ""
    version: ClassVar[int] = 0
    controller_epoch: int = 0
    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type, "version": self.version}
        for name in _fields(type(self)):
            value = getattr(self, name)
            d[name] = _to_builtin(value) if isinstance(value, (tuple, Endpoint)) else value
        return d

    @classmethod
    def from_dict(cls: type[R], d: dict[str, Any]) -> R:
        version = d.get("version", 0)
        if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version <= cls.version:
            raise ValueError(f"{cls.type}: unsupported version {version!r} (max {cls.version})")
        fields = _fields(cls)
        unknown = d.keys() - fields.keys() - {"type", "version"}
        if unknown:
            raise ValueError(f"{cls.type}: unknown fields {sorted(unknown)}")
        kwargs: dict[str, Any] = {}
        for name, (convert, required, where) in fields.items():
            if name in d:
                kwargs[name] = convert(d[name], where)
            elif required:
                raise ValueError(f"{cls.type}: missing field {name!r}")
        return cls(**kwargs)

    def stamped(self: R, controller_epoch: int, request_id: str | None) -> R:
        """This record as written by the controller of `controller_epoch` for `request_id`."""
        return dataclasses.replace(self, controller_epoch=controller_epoch, request_id=request_id)


@dataclass(frozen=True)
class RegisterBroker(MetadataRecord):
    """A broker (re)registers. Its broker epoch is the offset of this record unless given (>= 0)."""

    type: ClassVar[str] = "RegisterBroker"
    broker_id: int
    incarnation_id: str
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    broker_epoch: int = -1
    fenced: bool = True


@dataclass(frozen=True)
class UnregisterBroker(MetadataRecord):
    type: ClassVar[str] = "UnregisterBroker"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class FenceBroker(MetadataRecord):
    type: ClassVar[str] = "FenceBroker"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class UnfenceBroker(MetadataRecord):
    type: ClassVar[str] = "UnfenceBroker"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class Topic(MetadataRecord):
    type: ClassVar[str] = "Topic"
    name: str
    topic_id: str


@dataclass(frozen=True)
class RemoveTopic(MetadataRecord):
    type: ClassVar[str] = "RemoveTopic"
    topic_id: str


@dataclass(frozen=True)
class Partition(MetadataRecord):
    """A new partition of an existing topic (partitions are numbered 0..n-1 without gaps)."""

    type: ClassVar[str] = "Partition"
    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class PartitionChange(MetadataRecord):
    """A change of one partition; None means unchanged. Replay bumps `partition_epoch`, and
    `leader_epoch` when the leader changes."""

    type: ClassVar[str] = "PartitionChange"
    topic_id: str
    partition: int
    isr: tuple[int, ...] | None = None
    leader: int | None = None
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Config(MetadataRecord):
    """Set (or, with value None, delete) one config of a topic or broker."""

    type: ClassVar[str] = "Config"
    resource_type: str  # "topic" | "broker"
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True)
class ProducerIds(MetadataRecord):
    """A block of producer ids was handed to a broker; ids below `next_producer_id` are taken."""

    type: ClassVar[str] = "ProducerIds"
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True)
class NoOp(MetadataRecord):
    type: ClassVar[str] = "NoOp"


@dataclass(frozen=True)
class ClaimController(MetadataRecord):
    """`node_id` becomes the active controller for `controller_epoch` (exactly the next epoch:
    `log_rules.check_fencing`). `cluster_id` is the cluster id the claimant knows, or the random
    one it chose for a new log: the first claim that carries one names the cluster for good (the
    image keeps it; a later claim's is not read). Kafka formats every node with the id instead;
    kraft starts without a formatting step, so the log's first controller chooses it."""

    type: ClassVar[str] = "ClaimController"
    node_id: int
    cluster_id: str | None = None


@dataclass(frozen=True)
class UserScramCredential(MetadataRecord):
    """Kafka's UserScramCredentialRecord: a user's SCRAM credential for one mechanism (salt,
    StoredKey and ServerKey base64-encoded; never the password). Replaces an earlier one."""

    type: ClassVar[str] = "UserScramCredential"
    name: str
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True)
class RemoveUserScramCredential(MetadataRecord):
    type: ClassVar[str] = "RemoveUserScramCredential"
    name: str
    mechanism: str


@dataclass(frozen=True)
class AccessControlEntry(MetadataRecord):
    """Kafka's AccessControlEntryRecord: one ACL binding (metadata/acl.py), under its id."""

    type: ClassVar[str] = "AccessControlEntry"
    id: str
    resource_type: str  # TOPIC | GROUP | CLUSTER | TRANSACTIONAL_ID
    resource_name: str
    pattern_type: str  # LITERAL | PREFIXED
    principal: str  # User:alice, User:*
    host: str  # an address or *
    operation: str  # READ, WRITE, ..., ALL
    permission_type: str  # ALLOW | DENY


@dataclass(frozen=True)
class RemoveAccessControlEntry(MetadataRecord):
    type: ClassVar[str] = "RemoveAccessControlEntry"
    id: str


@dataclass(frozen=True)
class ClientQuota(MetadataRecord):
    """Kafka's ClientQuotaRecord: set (or, with value None, remove) one quota of a client entity.
    `user`/`client_id` None: that part is absent from the entity; "<default>": the default."""

    type: ClassVar[str] = "ClientQuota"
    user: str | None
    client_id: str | None
    key: str  # producer_byte_rate | consumer_byte_rate | request_percentage
    value: float | None


RECORD_TYPES: dict[str, type[MetadataRecord]] = {
    cls.type: cls
    for cls in (
        RegisterBroker, UnregisterBroker, FenceBroker, UnfenceBroker, Topic, RemoveTopic, Partition,
        PartitionChange, Config, ProducerIds, NoOp, ClaimController, UserScramCredential, RemoveUserScramCredential,
        AccessControlEntry, RemoveAccessControlEntry, ClientQuota,
    )
}


def record_from_dict(d: Any) -> MetadataRecord:
    """Parse a record dict; `ValueError` (with the reason) when it is unknown or malformed."""
    if not isinstance(d, dict):
        raise ValueError(f"record must be a dict, got {type(d).__name__}")
    kind = d.get("type")
    cls = RECORD_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown record type {kind!r}")
    try:
        return cls.from_dict(d)
    except (TypeError, AttributeError) as e:  # e.g. unhashable or odd values deep inside
        raise ValueError(f"{kind}: malformed record: {e}") from None


# -- field conversion -------------------------------------------------------------------------

Converter = Callable[[Any, str], Any]
_KIND = {int: "an int", bool: "a bool", str: "a string"}
_FIELDS: dict[type, dict[str, tuple[Converter, bool, str]]] = {}


def _fields(cls: type) -> dict[str, tuple[Converter, bool, str]]:
    """Per field of a record class: its converter (built once from the type hint), whether it is
    required, and its name in error messages (built once too: parsing runs per record)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        hints = typing.get_type_hints(cls)
        fields = _FIELDS[cls] = {
            f.name: (_converter(hints[f.name]),
                     f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                     f"{getattr(cls, 'type', cls.__name__)}.{f.name}")
            for f in dataclasses.fields(cls)
        }
    return fields


@functools.cache
def _converter(hint: Any) -> Converter:
    """A function checking a value against a field type (lists become tuples); ValueError when it does not fit."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        args = typing.get_args(hint)
        (inner,) = [a for a in args if a is not type(None)]
        convert_inner = _converter(inner)
        return lambda value, where: None if value is None else convert_inner(value, where)
    if origin is tuple:
        (item,) = [a for a in typing.get_args(hint) if a is not Ellipsis]
        convert_item = _converter(item)

        def convert_tuple(value: Any, where: str) -> tuple[Any, ...]:
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
            try:
                return tuple([convert_item(v, where) for v in value])
            except ValueError:  # again, naming the bad item (only on this path: it formats per item)
                return tuple(convert_item(v, f"{where}[{i}]") for i, v in enumerate(value))

        return convert_tuple
    if hint is Endpoint:
        return lambda value, where: Endpoint.from_dict(value)
    if hint is float:
        def convert_float(value: Any, where: str) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{where}: expected a number, got {value!r}")
            return float(value)

        return convert_float
    if hint in (int, bool, str):
        def convert_scalar(value: Any, where: str) -> Any:
            # bool is an int subclass: neither may pass for the other
            if type(value) is not hint and not (hint is int and isinstance(value, int) and not isinstance(value, bool)):
                raise ValueError(f"{where}: expected {_KIND[hint]}, got {value!r}")
            return value

        return convert_scalar
    raise AssertionError(f"unsupported field type {hint!r}")


def _coerce(value: Any, hint: Any, where: str) -> Any:
    return _converter(hint)(value, where)


def _to_builtin(value: Any) -> Any:
    if isinstance(value, tuple):  # record tuples hold scalars or endpoints, never tuples
        return [v.to_dict() if isinstance(v, Endpoint) else v for v in value]
    if isinstance(value, Endpoint):
        return value.to_dict()
    return value

"""The node's configuration: every broker/controller key it accepts (Kafka's names), with type,
default, validator and doc, and the loader that layers flags < config file < `--override k=v`.

Unknown keys and bad values raise `ConfigError` naming the key and what is accepted; keys of Kafka's
broker that this broker does not need are accepted and listed in `KraftConfig.ignored` (the node
warns once). Kafka's listener lists (`PLAINTEXT://:9092,CONTROLLER://:9093` with
`controller.listener.names`) set the client and controller listeners. Topic-level
overrides are validated by `validate_topic_configs` (the log's keys plus the replication ones).
"""

from __future__ import annotations


import difflib
import os
import socket
import tomllib

import javaproperties
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from kraft.kafka_broker_keys import KAFKA_BROKER_KEYS, is_kafka_key
from kraft.log.config import COMPRESSION_TYPES, TOPIC_CONFIG_KEYS, LogConfig

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A bad configuration key or value; `error_code` lets the HTTP layer render it."""

    error_code = "INVALID_CONFIG"

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


# ---- value types: each parses a string (properties files, overrides) or a native TOML value ----


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value.strip())
    raise ValueError(f"expected an integer, got {type(value).__name__}")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("expected true or false")


def _to_str(value: Any) -> str:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value).strip()
    raise ValueError(f"expected a string, got {type(value).__name__}")


def _to_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
        return [str(v).strip() for v in value]
    raise ValueError("expected a comma-separated list")


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "long": _to_int,
    "boolean": _to_bool,
    "string": _to_str,
    "list": _to_list,
    "password": _to_str,
}


# ---- validators: raise ValueError with the accepted values ----


def at_least(minimum: int, maximum: int = LONG_MAX) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value is not None and not minimum <= value <= maximum:
            raise ValueError(f"must be in [{minimum}, {maximum}], got {value}")

    return check


def one_of(*choices: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value is not None and value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {value!r}")

    return check


def subset_of(*choices: str, non_empty: bool = True) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value is None:
            return
        bad = [v for v in value if v not in choices]
        if bad or (non_empty and not value):
            raise ValueError(f"must be a non-empty list of {', '.join(choices)}, got {value!r}")

    return check


def parse_host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT`, optionally prefixed `NAME://` as Kafka's listeners are; `[v6]:PORT` allowed."""
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in [0, 65535], got {port}")
    host = host.strip("[]") or "0.0.0.0"
    return host, port


def parse_voters(text: str | list[str]) -> dict[int, tuple[str, int]]:
    """`ID@HOST:PORT,...` (Kafka's controller.quorum.voters) -> {node_id: (host, port)}."""
    voters: dict[int, tuple[str, int]] = {}
    for entry in _to_list(text):
        node_text, sep, address = entry.partition("@")
        if not sep or not node_text.strip().isdigit():
            raise ValueError(f"expected ID@HOST:PORT, got {entry!r}")
        node_id = int(node_text)
        if node_id in voters:
            raise ValueError(f"voter {node_id} listed twice")
        voters[node_id] = parse_host_port(address)
    return voters


def _host_port(value: Any) -> None:
    if value is not None:
        parse_host_port(value)


def _listeners(value: Any) -> None:
    """One HOST:PORT, or Kafka's NAME://HOST:PORT,... list."""
    for entry in _to_list(value or ""):
        parse_host_port(entry)


def _host_ports(value: Any) -> None:
    for entry in value or ():
        parse_host_port(entry)


def _log_dirs(value: Any) -> None:
    if value is None:
        return
    if not value or any(not d for d in value):
        raise ValueError("a comma-separated list of directories, none empty")
    resolved = [os.path.abspath(d) for d in value]
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"a directory is listed twice: {value}")


def _zk_connect(value: Any) -> None:
    if value is not None:
        from kraft.zk.znodes import split_connect  # pure, no kazoo

        split_connect(value)


def _voters(value: Any) -> None:
    if value:
        parse_voters(value)


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str  # int, long, boolean, string, list, password
    default: Any
    doc: str
    validator: Callable[[Any], None] | None = None

    def parse(self, raw: Any) -> Any:
        if raw is None:
            return None
        try:
            value = _PARSERS[self.type](raw)
            if self.validator is not None:
                self.validator(value)
        except ValueError as e:
            raise ConfigError(self.name, f"invalid value {raw!r} ({self.type}): {e}") from None
        return value


CLIENT_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_NON_NEG = at_least(0)
_POSITIVE = at_least(1)
_POS_INT = at_least(1, INT_MAX)

_KEYS = [
    ConfigKey("node.id", "int", 1, "This node's id, unique in the cluster.", at_least(0, INT_MAX)),
    ConfigKey("broker.id", "int", None, "Kafka's older name of node.id (a ZooKeeper-era server.properties): sets "
              "node.id; both set and different is refused.", at_least(0, INT_MAX)),
    ConfigKey("process.roles", "list", ["broker", "controller"],
              "Roles this process plays: broker, controller, or both.",
              subset_of("broker", "controller")),
    ConfigKey("controller.quorum.voters", "list", [],
              "The controller quorum as ID@HOST:PORT,...; empty means this node alone.", _voters),
    ConfigKey("controller.quorum.secret", "password", None,
              "The cluster's shared secret: the Raft transport's password and the key of the node credential "
              "every inter-node request carries (required with more than one node; generated in the data dir "
              "of a lone node). Prefer controller.quorum.secret.file: a flag shows in the process list."),
    ConfigKey("controller.quorum.secret.file", "string", None,
              "A file holding controller.quorum.secret (its first line), so the secret never shows in the "
              "process list."),
    ConfigKey("controller.quorum.bootstrap.servers", "list", [],
              "Client listeners (HOST:PORT,...) of nodes to reach the active controller through; "
              "required on a broker-only node.", _host_ports),
    ConfigKey("log.dirs", "list", ["./kraft-data"],
              "The log directories (JBOD): new replicas go to the live one holding the fewest partitions; "
              "the first also holds the node's metadata log and cluster id. A directory whose disk fails "
              "goes offline alone (docs/reliability.md).", _log_dirs),
    ConfigKey("log.dir.full.timeout.ms", "long", 30000,
              "A log directory whose writes fail with ENOSPC this long, none succeeding, goes offline "
              "like a failed disk (its leaderships move; it comes back with a restart). 0: at the first "
              "ENOSPC, as Kafka does. Shorter full disks heal in place (docs/reliability.md).", _NON_NEG),
    ConfigKey("listeners", "string", "127.0.0.1:9092",
              "The client listener (HTTP and the Kafka protocol), HOST:PORT; or Kafka's NAME://HOST:PORT,... list, "
              "where the entry named in controller.listener.names is the controller listener, the one named by "
              "inter.broker.listener.name (else the first other) the client listener, and the rest Kafka-only "
              "listeners.", _listeners),
    ConfigKey("advertised.listeners", "string", None,
              "The HOST:PORT clients are told to use (or Kafka's NAME://HOST:PORT list); defaults to "
              "listeners.", _listeners),
    ConfigKey("controller.listener.names", "list", [],
              "Names of the controller listeners in a Kafka-style listeners list (e.g. CONTROLLER)."),
    ConfigKey("controller.listeners", "string", None,
              "The controller (Raft) listener, HOST:PORT; defaults to this node's voter entry.",
              _host_port),
    ConfigKey("controller.advertised.listener", "string", None,
              "Where the other voters reach this controller when it is not controller.listeners (a NAT, a "
              "proxy): its entry in controller.quorum.voters. Kafka's CONTROLLER entry in advertised.listeners "
              "sets it.", _host_port),
    ConfigKey("security.protocol", "string", None,
              "The client listener's protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; default the "
              "listener's name in listeners (through listener.security.protocol.map), else PLAINTEXT. Nodes "
              "reach each other on their client listeners, so every node of a cluster uses the same one.",
              one_of(*CLIENT_PROTOCOLS)),
    ConfigKey("listener.security.protocol.map", "list", [],
              "Kafka's NAME:PROTOCOL,... for named listeners (e.g. CLIENT:SASL_SSL)."),
    ConfigKey("inter.broker.listener.name", "string", None,
              "The listener nodes use between them, which is the HTTP client listener: with several client "
              "entries in listeners, the one it names (default the first); the others are Kafka-only listeners."),
    ConfigKey("security.inter.broker.protocol", "string", None,
              "Kafka's protocol between brokers: when set, it must equal the client listener's.",
              one_of(*CLIENT_PROTOCOLS)),
    ConfigKey("ssl.keystore.type", "string", "PEM", "PEM: ssl.keystore.location holds the certificate "
              "chain and the private key in one PEM file.", one_of("PEM")),
    ConfigKey("ssl.keystore.location", "string", None,
              "The node's certificate chain and private key (PEM), required by SSL and SASL_SSL."),
    ConfigKey("ssl.key.password", "password", None, "The password of an encrypted private key."),
    ConfigKey("ssl.truststore.type", "string", "PEM", "PEM: ssl.truststore.location holds CA certificates.",
              one_of("PEM")),
    ConfigKey("ssl.truststore.location", "string", None,
              "CA certificates (PEM) trusted for client certificates and for the other nodes' listeners."),
    ConfigKey("ssl.client.auth", "string", "none",
              "TLS client certificates: none, requested (verified when sent) or required (mTLS).",
              one_of("none", "requested", "required")),
    ConfigKey("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions served and used.",
              subset_of("TLSv1.2", "TLSv1.3")),
    ConfigKey("ssl.endpoint.identification.algorithm", "string", "https",
              "https: a node checks that the other node's certificate names its host; empty turns the check off."),
    ConfigKey("ssl.principal.mapping.rules", "string", "DEFAULT",
              "Kafka's rules from a client certificate's subject to its principal (RULE:pattern/replacement/[LU], "
              "..., DEFAULT)."),
    ConfigKey("sasl.enabled.mechanisms", "list", ["SCRAM-SHA-256", "SCRAM-SHA-512"],
              "Mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (credentials in "
              "Authorization: Basic over TLS, checked against the SCRAM credentials in the metadata log).",
              subset_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
    ConfigKey("sasl.server.max.receive.size", "int", 524288,
              "Largest Kafka request frame a SASL listener reads before and during authentication (refused from "
              "its size, and the connection closed); socket.request.max.bytes applies once authenticated.",
              _POS_INT),
    ConfigKey("authorizer.class.name", "string", "",
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns on ACLs (stored in the metadata "
              "log, managed with kraft acls); empty: every principal may do everything.",
              one_of("", STANDARD_AUTHORIZER)),
    ConfigKey("super.users", "string", "",
              "Principals allowed everything whatever the ACLs say, separated by ';' (User:admin;User:ops)."),
    ConfigKey("allow.everyone.if.no.acl.found", "boolean", False,
              "With the authorizer on: allow an action on a resource that has no ACL at all."),
    ConfigKey("quota.window.num", "int", 11,
              "Client quotas: the number of windows a rate is measured over (a new client may burst for "
              "all but one of them).", at_least(2, 1000)),
    ConfigKey("quota.window.size.seconds", "int", 1, "Client quotas: the length of one window.",
              at_least(1, 3600)),
    ConfigKey("cluster.id", "string", None,
              "The cluster id; generated and written to meta.properties when absent."),
    ConfigKey("metadata.mode", "string", "kraft", "kraft (Raft quorum) or zookeeper (compat mode).",
              one_of("kraft", "zookeeper")),
    ConfigKey("zookeeper.connect", "string", None,
              "ZooKeeper HOST:PORT[,HOST:PORT...][/chroot]: run with metadata in ZooKeeper (compat mode).",
              _zk_connect),
    ConfigKey("zookeeper.session.timeout.ms", "int", 18000,
              "ZooKeeper session timeout: a broker or controller silent this long is gone.", _POS_INT),
    ConfigKey("zookeeper.connection.timeout.ms", "int", None,
              "How long to wait for ZooKeeper at start; defaults to the session timeout.", _POS_INT),
    ConfigKey("controlled.shutdown.enable", "boolean", True,
              "ZooKeeper mode: on SIGTERM, ask the controller to move this broker's leaderships (and take "
              "it out of the ISRs) before stopping, as Kafka does; false: just stop (closing the ZooKeeper "
              "session, after which the controller moves them). KRaft mode always asks to be fenced on a clean "
              "stop."),
    ConfigKey("num.partitions", "int", 1, "Default partition count of new topics.", _POS_INT),
    ConfigKey("default.replication.factor", "int", 1, "Default replication factor of new topics.",
              at_least(1, 32767)),
    ConfigKey("min.insync.replicas", "int", 1,
              "Minimum ISR size for acks=all produce requests to succeed.", _POS_INT),
    ConfigKey("auto.create.topics.enable", "boolean", True, "Create unknown topics on produce."),
    ConfigKey("delete.topic.enable", "boolean", True, "Allow deleting topics."),
    ConfigKey("message.max.bytes", "int", 1048588, "Largest record batch accepted.",
              at_least(0, INT_MAX)),
    ConfigKey("socket.request.max.bytes", "int", 104857600,
              "Largest HTTP request body and largest Kafka request frame (refused from its size, before it is read).",
              _POS_INT),
    ConfigKey("kafka.enable", "boolean", True,
              "Serve Kafka's binary protocol (the client port and the Kafka-only listeners); false: HTTP only."),
    ConfigKey("kafka.share.client.port", "boolean", True,
              "Serve the Kafka protocol on the HTTP client listener too, each connection told apart by its first "
              "bytes; false: Kafka clients connect to the Kafka-only listeners alone."),
    ConfigKey("kafka.listen", "list", [],
              "Kafka-only listeners, [NAME://]HOST:PORT,... (a shortcut for more entries in listeners). An entry's "
              "protocol is its NAME's (a protocol, or mapped by listener.security.protocol.map); without a NAME it "
              "is named KAFKA and takes the client listener's protocol.", _host_ports),
    ConfigKey("kafka.advertised.listen", "list", [],
              "What the Kafka-only listeners advertise, NAME://HOST:PORT,...; entries of advertised.listeners "
              "beyond the client listener's land here. Default: the listener's own address.", _host_ports),
    ConfigKey("connections.max.idle.ms", "long", 600000,
              "A Kafka connection with nothing read and nothing in flight this long is closed; a new connection "
              "on a client port must send its first bytes within it (and within 75 s).", _POSITIVE),
    ConfigKey("queued.max.requests", "int", 500,
              "Kafka requests read and not yet answered per connection (Kafka: per broker); past it the "
              "connection is not read.", _POS_INT),
    ConfigKey("queued.max.request.bytes", "long", 536870912,
              "Bytes of Kafka requests read and not yet answered, node-wide; a frame that does not fit waits "
              "unread (one frame always fits when nothing else is held). -1: unbounded, Kafka's default.",
              at_least(-1)),
    ConfigKey("max.connections", "int", INT_MAX, "Open connections on the client ports, node-wide; more are "
              "refused.", _POS_INT),
    ConfigKey("max.connections.per.ip", "int", INT_MAX, "Open connections from one address on the client ports; "
              "more are refused.", _POS_INT),
    ConfigKey("fetch.max.bytes", "int", 57671680, "Largest fetch answer.", _POS_INT),
    ConfigKey("log.segment.bytes", "int", 1073741824, "Segment file size.", at_least(14, INT_MAX)),
    ConfigKey("log.roll.ms", "long", None, "Roll a segment after this age (overrides hours).",
              _POSITIVE),
    ConfigKey("log.roll.hours", "int", 168, "Roll a segment after this age.", _POS_INT),
    ConfigKey("log.retention.ms", "long", None, "Retention time; -1 keeps forever.", at_least(-1)),
    ConfigKey("log.retention.minutes", "int", None, "Retention time in minutes.", at_least(-1)),
    ConfigKey("log.retention.hours", "int", 168, "Retention time in hours.", at_least(-1)),
    ConfigKey("log.retention.bytes", "long", -1, "Retention size per partition; -1 unlimited.",
              at_least(-1)),
    ConfigKey("log.retention.check.interval.ms", "long", 300000,
              "How often retention and compaction run.", _POSITIVE),
    ConfigKey("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.",
              at_least(0, INT_MAX)),
    ConfigKey("log.index.size.max.bytes", "int", 10485760, "Largest index file.",
              at_least(4, INT_MAX)),
    ConfigKey("log.open.files.max", "int", None,
              "Files of closed segments kept open at once, least recently used closed first; "
              "default an eighth of the open-files limit (16 to 10000).", _POS_INT),
    ConfigKey("stage.trace.events", "int", 0,
              "Stage events along records' way kept for kraft-bench --trace (GET /v1/trace), a ring; "
              "0: not recorded.", at_least(0, 10_000_000)),
    ConfigKey("log.flush.interval.messages", "long", LONG_MAX,
              "fsync after this many messages.", _POSITIVE),
    ConfigKey("log.flush.interval.ms", "long", None, "fsync after this many ms.", _NON_NEG),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", "int", 60000,
              "How often rolled segments are fsynced and the recovery point checkpointed (an "
              "unclean restart re-validates only the segments after it).", _POS_INT),
    ConfigKey("log.cleanup.policy", "list", ["delete"], "delete, compact, or both.",
              subset_of("delete", "compact")),
    ConfigKey("log.cleaner.delete.retention.ms", "long", 86400000,
              "How long tombstones stay after compaction.", _NON_NEG),
    ConfigKey("log.cleaner.min.compaction.lag.ms", "long", 0,
              "Minimum age before a record may be compacted.", _NON_NEG),
    ConfigKey("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.",
              one_of("CreateTime", "LogAppendTime")),
    ConfigKey("compression.type", "string", "producer",
              "Codec topics store batches in: producer (keep the producer's), uncompressed, gzip, "
              "snappy, lz4 or zstd.", one_of(*COMPRESSION_TYPES)),
    ConfigKey("unclean.leader.election.enable", "boolean", False,
              "Elect a leader outside the ISR when no ISR member is alive."),
    ConfigKey("broker.rack", "string", None, "Rack of this broker, for replica placement."),
    ConfigKey("broker.heartbeat.interval.ms", "int", 2000, "Broker heartbeat period.", _POS_INT),
    ConfigKey("broker.session.timeout.ms", "int", 9000,
              "A broker missing heartbeats this long is fenced.", _POS_INT),
    ConfigKey("replica.lag.time.max.ms", "long", 30000,
              "A follower not caught up this long leaves the ISR.", _POSITIVE),
    ConfigKey("replica.fetch.max.bytes", "int", 1048576, "Follower fetch size per partition.",
              _POS_INT),
    ConfigKey("replica.fetch.wait.max.ms", "int", 500, "Follower fetch long-poll time.", _NON_NEG),
    ConfigKey("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.",
              _POS_INT),
    ConfigKey("offsets.topic.replication.factor", "int", 3,
              "Replication factor of __consumer_offsets (capped at the live broker count).",
              at_least(1, 32767)),
    ConfigKey("offsets.retention.minutes", "int", 10080,
              "Committed offsets of a group expire this long after it became empty (or, for a "
              "topic its members do not subscribe to, after the commit).", at_least(1, INT_MAX)),
    ConfigKey("offsets.retention.check.interval.ms", "long", 600000,
              "How often expired offsets are removed.", _POSITIVE),
    ConfigKey("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.",
              _POS_INT),
    ConfigKey("transaction.state.log.replication.factor", "int", 3,
              "Replication factor of __transaction_state (capped at the live broker count).",
              at_least(1, 32767)),
    ConfigKey("transaction.state.log.min.isr", "int", 2,
              "min.insync.replicas of __transaction_state.", at_least(1, 32767)),
    ConfigKey("transaction.max.timeout.ms", "int", 900000,
              "The longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT).",
              _POS_INT),
    ConfigKey("transaction.partition.verification.grace.ms", "int", 30000,
              "A partition leader that took over less than this long ago answers a transaction's "
              "unverified first batch with the retriable NOT_ENOUGH_REPLICAS (the coordinator's "
              "verification may still be on its way, KIP-890); after it, INVALID_TXN_STATE.",
              at_least(0, INT_MAX)),
    ConfigKey("transactional.id.expiration.ms", "int", 604800000,
              "A transactional id with no open transaction and no request for this long is forgotten "
              "(a tombstone in __transaction_state).", _POS_INT),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
              "How often expired transactional ids are removed.", _POS_INT),
    ConfigKey("producer.id.expiration.ms", "int", 86400000,
              "A producer id's state in a partition is forgotten this long after its last write, "
              "unless a transaction of it is open there.", _POS_INT),
    ConfigKey("group.consumer.session.timeout.ms", "int", 45000, "Consumer member session timeout.",
              _POS_INT),
    ConfigKey("group.consumer.heartbeat.interval.ms", "int", 5000, "Consumer heartbeat interval.",
              _POS_INT),
    ConfigKey("group.initial.rebalance.delay.ms", "int", 3000,
              "A classic group's first rebalance waits this long after each new member (at most its "
              "rebalance timeout), so members starting together make one generation.", _NON_NEG),
    ConfigKey("group.min.session.timeout.ms", "int", 6000,
              "The smallest session timeout a classic group member may ask for.", _POS_INT),
    ConfigKey("group.max.session.timeout.ms", "int", 1800000,
              "The largest session timeout a classic group member may ask for.", _POS_INT),
    ConfigKey("group.max.size", "int", INT_MAX, "Members a classic group may have.", _POS_INT),
    ConfigKey("metadata.log.max.record.bytes.between.snapshots", "long", 20971520,
              "Metadata log bytes between snapshots.", _POSITIVE),
    ConfigKey("metadata.log.recovery", "string", "fail",
              "A lone controller's metadata log damaged in the middle (valid records after the "
              "damage): fail (refuse to start, the default) or truncate (drop every record from "
              "the damage on, knowingly). A torn tail is always cut.", one_of("fail", "truncate")),
    ConfigKey("metrics.topic.labels.enable", "boolean", True,
              "Label broker and log metrics by topic and partition; turn off for large clusters."),
]

CONFIG_KEYS: dict[str, ConfigKey] = {k.name: k for k in _KEYS}
UNNAMED_KAFKA_LISTENER = "KAFKA"


@dataclass(frozen=True)
class KafkaListenerSpec:
    """A listener serving the Kafka protocol: the client port (`shared` with HTTP) or a Kafka-only one."""

    name: str
    security_protocol: str
    host: str
    port: int
    advertised: tuple[str, int] | None = None  # None: its own address (the client port's: advertised.listeners)
    shared: bool = False

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")


@dataclass(frozen=True)
class KraftConfig:
    """Parsed, validated values of every key in CONFIG_KEYS (None where unset and no default)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()  # Kafka's keys that were given and mean nothing here

    def __getitem__(self, key: str) -> Any:
        if key not in CONFIG_KEYS:
            raise KeyError(key)
        return self.values.get(key, CONFIG_KEYS[key].default)

    @property
    def node_id(self) -> int:
        return self["node.id"]

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(sorted(set(self["process.roles"])))

    @property
    def is_broker(self) -> bool:
        return "broker" in self["process.roles"]

    @property
    def is_controller(self) -> bool:
        return "controller" in self["process.roles"]

    @property
    def data_dir(self) -> Path:
        """The first log directory: the node's own files (metadata log, meta.properties, secret)."""
        return Path(self["log.dirs"][0])

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d) for d in self["log.dirs"]]

    @property
    def listener(self) -> tuple[str, int]:
        return parse_host_port(self["listeners"])

    @property
    def advertised_listener(self) -> tuple[str, int]:
        return parse_host_port(self["advertised.listeners"] or self["listeners"])

    @property
    def listener_name(self) -> str:
        """The client listener's name in a Kafka-style `NAME://HOST:PORT` entry ("" without one)."""
        return _listener_name(self["listeners"])

    @property
    def security_protocol(self) -> str:
        """The client listener's protocol (also the one between nodes): security.protocol, else
        the listener's name mapped by listener.security.protocol.map or being a protocol itself."""
        if self["security.protocol"]:
            return self["security.protocol"]
        name = self.listener_name
        mapped = _protocol_map(self["listener.security.protocol.map"]).get(name)
        if mapped:
            return mapped
        return name if name in CLIENT_PROTOCOLS else "PLAINTEXT"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def kafka_listeners(self) -> list[KafkaListenerSpec]:
        """The listeners serving the Kafka protocol (none with kafka.enable=false): the client port
        first (kafka.share.client.port), named as the client listener or, unnamed, after its
        protocol, as Kafka's default PLAINTEXT://:9092; then kafka.listen's."""
        if not self["kafka.enable"]:
            return []
        specs = []
        if self["kafka.share.client.port"]:
            specs.append(KafkaListenerSpec(self.listener_name or self.security_protocol, self.security_protocol,
                                           *self.listener, shared=True))
        mapped = _protocol_map(self["listener.security.protocol.map"])
        advertised = {_listener_name(e) or UNNAMED_KAFKA_LISTENER: parse_host_port(e)
                      for e in self["kafka.advertised.listen"]}
        for entry in self["kafka.listen"]:
            name = _listener_name(entry)
            protocol = mapped.get(name) or (name if name in CLIENT_PROTOCOLS else None)
            if not name:
                name, protocol = UNNAMED_KAFKA_LISTENER, self.security_protocol
            if protocol is None:
                raise ConfigError("kafka.listen", f"listener {name} has no protocol: name it after one of "
                                                  f"{', '.join(CLIENT_PROTOCOLS)} or map it in "
                                                  "listener.security.protocol.map")
            specs.append(KafkaListenerSpec(name, protocol, *parse_host_port(entry), advertised.get(name)))
        return specs

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        return parse_voters(self["controller.quorum.voters"])

    @property
    def retention_ms(self) -> int:
        """Kafka's precedence: log.retention.ms, then .minutes, then .hours."""
        if self["log.retention.ms"] is not None:
            return self["log.retention.ms"]
        if self["log.retention.minutes"] is not None:
            return self._scaled(self["log.retention.minutes"], 60_000)
        return self._scaled(self["log.retention.hours"], 3_600_000)

    @property
    def segment_ms(self) -> int:
        if self["log.roll.ms"] is not None:
            return self["log.roll.ms"]
        return self["log.roll.hours"] * 3_600_000

    @staticmethod
    def _scaled(value: int, unit_ms: int) -> int:
        return -1 if value < 0 else value * unit_ms

    def topic_defaults(self) -> dict[str, str]:
        """The broker-level defaults of topic configs, as the topic keys name them."""
        flush_ms = self["log.flush.interval.ms"]
        return {
            "cleanup.policy": ",".join(self["log.cleanup.policy"]),
            "delete.retention.ms": str(self["log.cleaner.delete.retention.ms"]),
            "flush.messages": str(self["log.flush.interval.messages"]),
            "flush.ms": str(LONG_MAX if flush_ms is None else flush_ms),
            "index.interval.bytes": str(self["log.index.interval.bytes"]),
            "max.message.bytes": str(self["message.max.bytes"]),
            "message.timestamp.type": self["log.message.timestamp.type"],
            "compression.type": self["compression.type"],
            "min.compaction.lag.ms": str(self["log.cleaner.min.compaction.lag.ms"]),
            "min.insync.replicas": str(self["min.insync.replicas"]),
            "retention.bytes": str(self["log.retention.bytes"]),
            "retention.ms": str(self.retention_ms),
            "segment.bytes": str(self["log.segment.bytes"]),
            "segment.index.bytes": str(self["log.index.size.max.bytes"]),
            "segment.ms": str(self.segment_ms),
            "unclean.leader.election.enable": str(self["unclean.leader.election.enable"]).lower(),
        }

    def log_config(self) -> LogConfig:
        """The broker-wide LogConfig every topic starts from."""
        return replace(LogConfig.from_topic_configs(self.topic_defaults()),
                       producer_id_expiration_ms=self["producer.id.expiration.ms"])

    def check(self) -> None:
        """Cross-key rules, checked once everything is layered."""
        self._check_security()
        if self.zookeeper_mode:
            self._check_zookeeper_mode()
            return
        voters = self.voters
        if self.is_controller and voters and self.node_id not in voters:
            raise ConfigError(
                "controller.quorum.voters",
                f"node {self.node_id} has the controller role but is not among the voters "
                f"{sorted(voters)}",
            )
        if self.is_controller and voters and (self["controller.advertised.listener"] or self["controller.listeners"]):
            self._check_controller_listener(voters[self.node_id])
        if self.is_controller and len(voters) > 1 and not (self["controller.quorum.secret"]
                                    or self["controller.quorum.secret.file"]):
            raise ConfigError(
                "controller.quorum.secret", "required when the quorum has more than one voter"
            )
        if not self.is_controller and not voters:
            raise ConfigError(
                "controller.quorum.voters", "a broker-only node needs the controller quorum voters"
            )
        if not self.is_controller and not (self["controller.quorum.secret"] or self["controller.quorum.secret.file"]):
            raise ConfigError(
                "controller.quorum.secret", "a broker-only node needs the cluster's secret (its node credential; "
                "give it as controller.quorum.secret.file)"
            )
        if not self.is_controller and not self["controller.quorum.bootstrap.servers"]:
            raise ConfigError(
                "controller.quorum.bootstrap.servers",
                "a broker-only node needs the client listener of at least one controller",
            )

    def _check_controller_listener(self, voter: tuple[str, int]) -> None:
        """The controller listener is where the other voters connect: its own voter entry (a
        wildcard host, or a name of the same address, binds it too), unless it advertises another
        address (controller.advertised.listener: a NAT or a proxy in between), which must be it."""
        key = "controller.advertised.listener" if self["controller.advertised.listener"] else "controller.listeners"
        host, port = parse_host_port(self[key])
        voter_host, voter_port = voter
        if port == voter_port and (host in (voter_host, "0.0.0.0", "::") or _may_be_same_host(host, voter_host)):
            return
        what = "advertised controller listener" if key != "controller.listeners" else "controller listener"
        raise ConfigError(key, f"this node's {what} {host}:{port} is not its entry in "
                                                  f"controller.quorum.voters, {self.node_id}@{voter_host}:{voter_port}: "
                                                  f"the other voters would look for it at {voter_host}:{voter_port}")

    def _check_kafka_listeners(self) -> None:
        specs = self.kafka_listeners
        names = [s.name for s in specs]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise ConfigError("kafka.listen", f"two Kafka listeners are named {duplicate}")
        unknown = [e for e in self["kafka.advertised.listen"]
                   if (_listener_name(e) or UNNAMED_KAFKA_LISTENER) not in names]
        if unknown and self["kafka.enable"]:
            raise ConfigError("kafka.advertised.listen", f"{unknown[0]} names no Kafka-only listener "
                                                         f"(they are {', '.join(names) or 'none'})")
        if self["kafka.enable"] and not specs:
            raise ConfigError("kafka.share.client.port", "false leaves the Kafka protocol no listener: add one "
                                                         "(kafka.listen) or set kafka.enable=false")

    def _check_security(self) -> None:
        protocol = self.security_protocol
        self._check_kafka_listeners()
        tls = [s.name for s in self.kafka_listeners if s.uses_tls and not s.shared]
        if self.uses_tls:
            tls.insert(0, f"security.protocol={protocol}")
        if tls and not self["ssl.keystore.location"]:
            raise ConfigError("ssl.keystore.location", f"required by {tls[0]}: the node's "
                                                       "certificate chain and private key in one PEM file")
        if tls and self["ssl.client.auth"] != "none" and not self["ssl.truststore.location"]:
            raise ConfigError("ssl.truststore.location", f"required by ssl.client.auth={self['ssl.client.auth']}: "
                                                         "the CA certificates client certificates are checked against")
        if not tls and self["ssl.client.auth"] != "none":
            raise ConfigError("ssl.client.auth", f"needs a TLS listener; security.protocol is {protocol}")
        inter = self["inter.broker.listener.name"]
        if inter and inter.upper() != (self.listener_name or protocol):
            raise ConfigError("inter.broker.listener.name", f"nodes talk over the client listener "
                                                            f"({self.listener_name or protocol}), got {inter!r}")
        if self["security.inter.broker.protocol"] not in (None, protocol):
            raise ConfigError("security.inter.broker.protocol", f"nodes talk over the client listener, whose "
                                                                f"protocol is {protocol}")

    @property
    def zookeeper_mode(self) -> bool:
        """zookeeper.connect (or metadata.mode=zookeeper) selects the ZooKeeper compat mode."""
        return self["metadata.mode"] == "zookeeper" or self["zookeeper.connect"] is not None

    def _check_zookeeper_mode(self) -> None:
        if self["zookeeper.connect"] is None:
            raise ConfigError("zookeeper.connect", "metadata.mode=zookeeper needs zookeeper.connect")
        if self["metadata.mode"] == "kraft" and "metadata.mode" in self.values:
            raise ConfigError("metadata.mode", "kraft contradicts zookeeper.connect")
        for key in ("process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers"):
            if key in self.values:
                raise ConfigError(key, "not used in ZooKeeper mode (zookeeper.connect is set): every node is "
                                       "a broker and may become the controller; remove it")
        if not (self["controller.quorum.secret"] or self["controller.quorum.secret.file"]):
            # a per-node generated secret would make every node refuse the controller's pushes
            raise ConfigError("controller.quorum.secret", "required in ZooKeeper mode: the nodes sign their "
                                                          "requests to each other with it (or use .secret.file)")
        if self["authorizer.class.name"]:  # refused rather than left unenforced
            raise ConfigError("authorizer.class.name", "ACLs live in the KRaft metadata log; ZooKeeper mode has "
                                                       "no authorizer")
        try:  # an optional dependency: said before the node starts, not as a traceback from its import
            import kazoo  # noqa: F401
        except ImportError:
            raise ConfigError("zookeeper.connect", "ZooKeeper mode needs the kazoo package, which kraft's zk extra "
                                                   "installs: pip install 'kraft[zk]'") from None


def _may_be_same_host(a: str, b: str) -> bool:
    """Whether two host names may be one host: they share an address, or one does not resolve
    (yet: a container's name may not be in DNS when it starts), so no mismatch is proven."""
    try:
        addresses = [{info[4][0] for info in socket.getaddrinfo(h, None)} for h in (a, b)]
    except OSError:
        return True
    return bool(addresses[0] & addresses[1])


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML may nest dotted keys (`[log] dirs = ...`); kraft keys are the dotted names."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def parse_properties(text: str) -> dict[str, str]:
    """A Java `.properties` file as Kafka reads it (java.util.Properties): `=`, `:` or space
    separators, `#`/`!` comments, backslash line continuations and escapes (\\uXXXX too)."""
    try:
        return {key: value.strip() for key, value in javaproperties.loads(text).items()}
    except ValueError as e:  # a malformed \\u escape
        raise ConfigError("--config", f"not a valid .properties file: {e}") from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Reads TOML (`.toml`) or a Kafka properties file (anything else)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError("--config", f"cannot read {path}: {e.strerror}") from None
    if path.suffix == ".toml":
        try:
            return _flatten(tomllib.loads(text))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError("--config", f"{path} is not valid TOML: {e}") from None
    return parse_properties(text)


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--override", f"expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def build_config(*layers: Mapping[str, Any]) -> KraftConfig:
    """Layers raw values (later layers win), parses and validates each key, checks cross-key rules."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    values: dict[str, Any] = {}
    ignored = []
    for key, raw in merged.items():
        spec = CONFIG_KEYS.get(key)
        if spec is None:
            if is_kafka_key(key):
                ignored.append(key)
                continue
            raise ConfigError(key, f"unknown configuration key, neither kraft's nor Kafka's{_nearest_key(key)} "
                                   "(`kraft-node --help-config` lists kraft's)")
        values[key] = spec.parse(raw)
    _resolve_node_id(values)
    _resolve_listeners(values)
    config = KraftConfig(values, tuple(sorted(ignored)))
    config.check()
    return config



def _nearest_key(key: str) -> str:
    """"; did you mean 'x'?" for the valid key nearest to a typo, "" when none is near."""
    near = difflib.get_close_matches(key, sorted({*CONFIG_KEYS, *KAFKA_BROKER_KEYS}), n=1)
    return f"; did you mean {near[0]!r}?" if near else ""


def _resolve_node_id(values: dict[str, Any]) -> None:
    """broker.id is node.id's older name (Kafka: KafkaConfig refuses the two when they differ)."""
    broker_id = values.get("broker.id")
    if broker_id is None:
        return
    node_id = values.setdefault("node.id", broker_id)
    if node_id != broker_id:
        raise ConfigError("broker.id", f"broker.id ({broker_id}) and node.id ({node_id}) disagree: they name the "
                                       "same id (node.id is its KRaft name); set one of them")


def _resolve_listeners(values: dict[str, Any]) -> None:
    """Kafka's `listeners=PLAINTEXT://:9092,SASL_SSL://:9094,CONTROLLER://:9093`: the entries named
    in controller.listener.names give controller.listeners (unless set); of the others (each a
    PLAINTEXT/SSL/SASL_* listener or a mapped name) the one inter.broker.listener.name names, else
    the first, is the client listener, and the rest are Kafka-only listeners (kafka.listen);
    advertised.listeners likewise (kafka.advertised.listen)."""
    names = {n.upper() for n in values.get("controller.listener.names") or ()}
    inter = (values.get("inter.broker.listener.name") or "").upper()
    for key, kafka_key in (("listeners", "kafka.listen"), ("advertised.listeners", "kafka.advertised.listen")):
        entries = _to_list(values.get(key) or "")
        if len(entries) <= 1 and not any(_listener_name(e) in names for e in entries):
            continue
        controller = [e for e in entries if _listener_name(e) in names]
        client = [e for e in entries if _listener_name(e) not in names]
        mapped = _protocol_map(values.get("listener.security.protocol.map") or ())
        unknown = [e for e in client if _listener_name(e) not in (*CLIENT_PROTOCOLS, *mapped, "")]
        if unknown:
            raise ConfigError(key, f"a client listener must be one of {', '.join(CLIENT_PROTOCOLS)} or a name in "
                                   f"listener.security.protocol.map, got {unknown[0]}")
        if len(client) > 1 and any(not _listener_name(e) for e in client):
            raise ConfigError(key, f"with several client listeners each needs a NAME://, got {', '.join(client)}")
        chosen = next((e for e in client if inter and _listener_name(e) == inter), client[0] if client else None)
        if chosen is not None:
            values[key] = chosen
            values[kafka_key] = [e for e in client if e != chosen] + list(values.get(kafka_key) or ())
        else:
            values.pop(key)
        if key == "listeners" and controller and not values.get("controller.listeners"):
            values["controller.listeners"] = controller[0]
        if key == "advertised.listeners" and controller and not values.get("controller.advertised.listener"):
            values["controller.advertised.listener"] = controller[0]


def _protocol_map(entries: Iterable[str]) -> dict[str, str]:
    """listener.security.protocol.map: NAME:PROTOCOL,... -> {NAME: PROTOCOL}."""
    out = {}
    for entry in entries:
        name, sep, protocol = entry.partition(":")
        if not sep or protocol.strip().upper() not in CLIENT_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map", f"expected NAME:PROTOCOL with a protocol of "
                                                                f"{', '.join(CLIENT_PROTOCOLS)}, got {entry!r}")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def _listener_name(entry: str) -> str:
    name, sep, _ = entry.partition("://")
    return name.strip().upper() if sep else ""


def load_config(
    flags: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    overrides: Iterable[str] = (),
) -> KraftConfig:
    """flags < config file < --override, as design.md §2 orders them."""
    file_values = read_config_file(config_file) if config_file else {}
    return build_config(flags or {}, file_values, parse_overrides(overrides))


def describe_keys() -> str:
    """One line per key, for `kraft-node --help-config`."""
    return "\n".join(
        f"{k.name} ({k.type}, default {k.default!r}): {k.doc}" for k in _KEYS
    )


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, str]:
    """Checks topic-level overrides (`log.config.TOPIC_CONFIG_KEYS`): known key and valid value;
    returns them as strings. Raises ConfigError (error_code INVALID_CONFIG) naming the key."""
    out: dict[str, str] = {}
    for key, raw in configs.items():
        if key not in TOPIC_CONFIG_KEYS:
            raise ConfigError(
                str(key), f"unknown topic config; accepted: {', '.join(sorted(TOPIC_CONFIG_KEYS))}"
            )
        text = str(raw).lower() if isinstance(raw, bool) else str(raw)
        try:
            LogConfig.from_topic_configs({key: text})
        except ValueError as e:
            raise ConfigError(key, str(e)) from None
        out[key] = text
    return out

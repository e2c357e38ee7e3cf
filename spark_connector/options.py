"""The connector's options, parsed and checked once on the driver (pure).

Names and meanings are those of Spark's Kafka integration with `kraft.` in place of `kafka.`, so a
Kafka job ports by renaming. Spark hands options over case-insensitively (lower-cased keys); every
unknown name is reported at once with the list of valid ones, and every bad value names the option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from kraft.api.client.fetcher import ISOLATION_LEVELS, READ_UNCOMMITTED
from kraft.api.client.security import PLAINTEXT, ClientSecurity, from_kafka_properties, pop_security
from kraft.api.errors import KraftError
from kraft.log.batch import COMPRESSIONS
from kraft.spark_connector.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition, from_json, parse_assign

BOOTSTRAP = "kraft.bootstrap.servers"
_SPARK_OWNED = ("path", "checkpointLocation", "queryName")  # Spark passes these through to sources

# Kafka's client security keys, `kraft.`-prefixed as Spark's Kafka source takes them `kafka.`-prefixed
SECURITY_OPTIONS = (
    "kraft.security.protocol", "kraft.sasl.mechanism", "kraft.sasl.jaas.config", "kraft.ssl.truststore.location",
    "kraft.ssl.truststore.type", "kraft.ssl.keystore.location", "kraft.ssl.keystore.type", "kraft.ssl.key.password",
    "kraft.ssl.endpoint.identification.algorithm",
)

SOURCE_OPTIONS = (
    BOOTSTRAP, "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss", "includeHeaders",
    "kraftConsumer.pollTimeoutMs", "kraft.max.partition.fetch.bytes", "kraft.request.timeout.ms",
    "kraft.isolation.level", *SECURITY_OPTIONS,
)
SINK_OPTIONS = (
    BOOTSTRAP, "topic", "includeHeaders", "exactlyOnce", "kraft.transactional.id.prefix", "kraft.transaction.timeout.ms",
    "kraft.acks", "kraft.compression.type", "kraft.batch.size", "kraft.request.timeout.ms", *SECURITY_OPTIONS,
)


def parse_security(opts: Mapping[str, str]) -> ClientSecurity:
    """The kraft.security.*/sasl.*/ssl.* options as the client's security settings."""
    props = {name.removeprefix("kraft."): value for name, value in opts.items() if name in SECURITY_OPTIONS}
    try:
        return pop_security(from_kafka_properties(props))
    except KraftError as e:
        raise KraftError("INVALID_CONFIG", f"security options: {e.message}") from None


def _bad(option: str, message: str) -> KraftError:
    return KraftError("INVALID_CONFIG", f"option {option}: {message}")


def _check_names(options: Mapping[str, str], known: tuple[str, ...], role: str) -> dict[str, str]:
    """Returns the options keyed by their canonical spelling; unknown names raise, listing all."""
    canonical = {name.lower(): name for name in known + _SPARK_OWNED}
    out: dict[str, str] = {}
    unknown = []
    for key, value in options.items():
        name = canonical.get(key.lower())
        if name is None:
            unknown.append(key)
        elif name not in _SPARK_OWNED:
            out[name] = str(value)
    if unknown:
        raise KraftError(
            "INVALID_CONFIG",
            f"unknown option(s) for the kraft {role}: {', '.join(sorted(unknown))}; "
            f"valid options are: {', '.join(known)}",
        )
    return out


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise _bad(name, f"expected true or false, got {raw!r}")


def _int(opts: Mapping[str, str], name: str, default: int | None, minimum: int = 1) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise _bad(name, f"expected an integer, got {raw!r}") from None
    if value < minimum:
        raise _bad(name, f"must be at least {minimum}, got {value}")
    return value


def parse_bootstrap(raw: str | None) -> tuple[str, ...]:
    if not raw or not raw.strip():
        raise _bad(BOOTSTRAP, "is required, e.g. .option('kraft.bootstrap.servers', '127.0.0.1:9092')")
    servers = tuple(s.strip() for s in raw.split(",") if s.strip())
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise _bad(BOOTSTRAP, f"{server!r} is not host:port")
    return servers


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions to read: exactly one of assign, subscribe, subscribePattern."""

    assign: tuple[TopicPartition, ...] = ()
    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics or any(t == topic for t, _ in self.assign)


@dataclass(frozen=True)
class OffsetSpec:
    """A starting or ending position: earliest, latest, per-partition offsets, or timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: PartitionOffsets | None = None  # for "offsets" (-2/-1 allowed) and "timestamps"
    timestamp: int | None = None  # for "timestamp": one timestamp for every partition


EARLIEST_SPEC = OffsetSpec("earliest")
LATEST_SPEC = OffsetSpec("latest")


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: tuple[str, ...]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec  # batch queries only
    timestamp_strategy: str  # "error" | "latest": no offset is that late
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    max_partition_fetch_bytes: int
    request_timeout_ms: int
    security: ClientSecurity = PLAINTEXT
    isolation_level: str = READ_UNCOMMITTED


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribePattern") if name in opts]
    if len(given) != 1:
        raise KraftError(
            "INVALID_CONFIG",
            "exactly one of the options assign, subscribe, subscribePattern must be given"
            + (f", got {', '.join(given)}" if given else ""),
        )
    name = given[0]
    raw = opts[name]
    if name == "assign":
        return Subscription(assign=tuple(parse_assign(raw)))
    if name == "subscribe":
        topics = tuple(sorted({t.strip() for t in raw.split(",") if t.strip()}))
        if not topics:
            raise _bad("subscribe", f"needs a comma-separated list of topics, got {raw!r}")
        return Subscription(topics=topics)
    try:
        re.compile(raw)
    except re.error as e:
        raise _bad("subscribePattern", f"{raw!r} is not a valid regular expression: {e}") from None
    return Subscription(pattern=raw)


def _offset_spec(opts: Mapping[str, str], prefix: str, default: OffsetSpec) -> OffsetSpec:
    """`<prefix>Timestamp` beats `<prefix>OffsetsByTimestamp` beats `<prefix>Offsets` (Kafka's order)."""
    ts = opts.get(f"{prefix}Timestamp")
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=_int(opts, f"{prefix}Timestamp", None, minimum=0))
    by_ts = opts.get(f"{prefix}OffsetsByTimestamp")
    if by_ts is not None:
        stamps = from_json(by_ts, f"{prefix}OffsetsByTimestamp")
        if any(v < 0 for v in stamps.values()):
            raise _bad(f"{prefix}OffsetsByTimestamp", "timestamps must be non-negative milliseconds")
        return OffsetSpec("timestamps", offsets=stamps)
    raw = opts.get(f"{prefix}Offsets")
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        return EARLIEST_SPEC if word == "earliest" else LATEST_SPEC
    offsets = from_json(raw, f"{prefix}Offsets")
    bad = {tp: o for tp, o in offsets.items() if o < EARLIEST}
    if bad:
        raise _bad(f"{prefix}Offsets", f"offsets below -2 are invalid (-2 earliest, -1 latest): {bad}")
    return OffsetSpec("offsets", offsets=offsets)


def _no_latest_start(spec: OffsetSpec) -> None:
    if spec.kind == "latest" or (spec.kind == "offsets" and LATEST in spec.offsets.values()):  # type: ignore[union-attr]
        raise _bad("startingOffsets", "latest (-1) is not allowed for batch queries")


def _no_earliest_end(spec: OffsetSpec) -> None:
    if spec.kind == "earliest" or (spec.kind == "offsets" and EARLIEST in spec.offsets.values()):  # type: ignore[union-attr]
        raise _bad("endingOffsets", "earliest (-2) is not allowed as an ending offset")


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    opts = _check_names(options, SOURCE_OPTIONS, "source")
    starting = _offset_spec(opts, "starting", LATEST_SPEC if streaming else EARLIEST_SPEC)
    ending = _offset_spec(opts, "ending", LATEST_SPEC)
    if streaming:
        ending_given = [n for n in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp") if n in opts]
        if ending_given:
            raise _bad(ending_given[0], "is for batch queries only; streaming queries read until stopped")
    else:
        _no_latest_start(starting)
        _no_earliest_end(ending)
    strategy = opts.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise _bad("startingOffsetsByTimestampStrategy", f"expected error or latest, got {strategy!r}")
    isolation = opts.get("kraft.isolation.level", READ_UNCOMMITTED).strip().lower()
    if isolation not in ISOLATION_LEVELS:
        raise _bad("kraft.isolation.level", f"expected {' or '.join(ISOLATION_LEVELS)}, got {isolation!r}")
    return SourceOptions(
        bootstrap_servers=parse_bootstrap(opts.get(BOOTSTRAP)),
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", None),
        min_partitions=_int(opts, "minPartitions", None),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        poll_timeout_ms=_int(opts, "kraftConsumer.pollTimeoutMs", 120_000),  # type: ignore[arg-type]
        max_partition_fetch_bytes=_int(opts, "kraft.max.partition.fetch.bytes", 8 * 1024 * 1024),  # type: ignore[arg-type]
        request_timeout_ms=_int(opts, "kraft.request.timeout.ms", 30_000),  # type: ignore[arg-type]
        security=parse_security(opts),
        isolation_level=isolation,
    )


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: tuple[str, ...]
    topic: str | None  # overrides the topic column when given
    acks: str  # "0" | "1" | "all"
    compression: str
    batch_size: int  # bytes of record payload per batch
    request_timeout_ms: int
    exactly_once: bool
    security: ClientSecurity = PLAINTEXT
    transactional_id_prefix: str | None = None  # the transactional sink (spark_connector/transactional.py)
    transaction_timeout_ms: int = 60_000


def parse_sink_options(options: Mapping[str, str], streaming: bool) -> SinkOptions:
    opts = _check_names(options, SINK_OPTIONS, "sink")
    acks = opts.get("kraft.acks", "all").strip().lower()
    if acks == "-1":
        acks = "all"
    if acks not in ("0", "1", "all"):
        raise _bad("kraft.acks", f"expected 0, 1, all or -1, got {acks!r}")
    compression = opts.get("kraft.compression.type", "none").strip().lower()
    if compression not in COMPRESSIONS:
        raise _bad("kraft.compression.type", f"expected one of {', '.join(COMPRESSIONS)}, got {compression!r}")
    exactly_once = _bool(opts, "exactlyOnce", False)
    if exactly_once and not streaming:
        raise _bad("exactlyOnce", "applies to streaming writes (it keys on the query id and micro-batch id)")
    if exactly_once and acks != "all":
        raise _bad("exactlyOnce", "needs kraft.acks=all: a write the broker may lose cannot be deduplicated")
    prefix = opts.get("kraft.transactional.id.prefix")
    if prefix is not None:
        if not streaming:
            raise _bad("kraft.transactional.id.prefix", "applies to streaming writes (it keys on the query id "
                                                        "and micro-batch id)")
        if exactly_once:
            raise _bad("kraft.transactional.id.prefix", "and exactlyOnce=true are two exactly-once modes: choose one")
        if acks != "all":
            raise _bad("kraft.transactional.id.prefix", "needs kraft.acks=all, as every transactional producer")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise _bad("topic", "must not be empty")
    return SinkOptions(
        bootstrap_servers=parse_bootstrap(opts.get(BOOTSTRAP)),
        topic=topic.strip() if topic else None,
        acks=acks,
        compression=compression,
        batch_size=_int(opts, "kraft.batch.size", 1024 * 1024),  # type: ignore[arg-type]
        request_timeout_ms=_int(opts, "kraft.request.timeout.ms", 30_000),  # type: ignore[arg-type]
        exactly_once=exactly_once,
        security=parse_security(opts),
        transactional_id_prefix=prefix,
        transaction_timeout_ms=_int(opts, "kraft.transaction.timeout.ms", 60_000),  # type: ignore[arg-type]
    )

"""LogConfig: the per-partition storage settings, with Kafka's defaults and Kafka's topic keys.

`from_topic_configs` reads topic-level overrides (`segment.bytes`, `retention.ms`, ...) over a base
config and rejects bad values with a ValueError naming the key; `from_broker_configs` reads the
broker-wide `log.*` defaults of a server.properties. `TOPIC_CONFIG_KEYS` lists the topic keys
understood here, so the broker can validate a topic's configs before committing them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

LONG_MAX = 2**63 - 1  # Kafka's Long.MAX_VALUE: "never" for flush.messages / flush.ms
INT_MAX = 2**31 - 1
CLEANUP_POLICIES = ("delete", "compact")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# Kafka's topic compression.type: a codec to store batches in, or `producer` (keep the producer's)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_message_bytes: int = 1048588
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    # broker-wide, not a topic key: Kafka's producer.id.expiration.ms (idle idempotent producers)
    producer_id_expiration_ms: int = 86400000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def target_compression(self) -> str | None:
        """The codec batches are stored in (a `log.compression` name), None to keep the
        producer's."""
        if self.compression_type == "producer":
            return None
        return "none" if self.compression_type == "uncompressed" else self.compression_type

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """`base` (broker defaults) overridden by Kafka topic keys; ValueError names a bad key."""
        changes: dict[str, Any] = {}
        for key, raw in configs.items():
            spec = _TOPIC_KEYS.get(key)
            if spec is None:
                raise ValueError(f"unknown topic config {key!r}")
            field, parse = spec
            changes[field] = parse(key, raw)
        return dataclasses.replace(base or cls(), **changes)

    @classmethod
    def from_broker_configs(cls, configs: Mapping[str, Any]) -> LogConfig:
        """Broker-wide defaults from server.properties keys (`log.segment.bytes`,
        `log.retention.hours`, ...); keys that are not log settings are ignored."""
        topic_configs: dict[str, Any] = {}
        # Kafka's precedence: ms over minutes over hours, so apply coarse units first.
        for key, topic_key, scale in _BROKER_KEYS:
            if key not in configs:
                continue
            value = configs[key]
            if scale != 1:
                value = _long(key, value)
                value = value * scale if value >= 0 else -1  # negative means unlimited
            topic_configs[topic_key] = value
        return cls.from_topic_configs(topic_configs)

    def to_topic_configs(self) -> dict[str, str]:
        """Kafka topic keys with string values (what describe-configs shows)."""
        out = {}
        for key, (field, _) in _TOPIC_KEYS.items():
            value = getattr(self, field)
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


def _long(key: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"{key} must be an integer, got {raw!r}")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be an integer, got {raw!r}") from None
    if not -(2**63) <= value <= LONG_MAX:
        raise ValueError(f"{key} out of range: {value}")
    return value


def _at_least(minimum: int, maximum: int = LONG_MAX) -> Callable[[str, Any], int]:
    def parse(key: str, raw: Any) -> int:
        value = _long(key, raw)
        if not minimum <= value <= maximum:
            raise ValueError(f"{key} must be in [{minimum}, {maximum}], got {value}")
        return value

    return parse


def _cleanup_policy(key: str, raw: Any) -> str:
    parts = [p.strip() for p in str(raw).split(",") if p.strip()]
    if not parts or any(p not in CLEANUP_POLICIES for p in parts):
        raise ValueError(f"{key} must be delete, compact or compact,delete, got {raw!r}")
    return ",".join(sorted(set(parts)))  # canonical: "compact,delete"


def _timestamp_type(key: str, raw: Any) -> str:
    if raw not in TIMESTAMP_TYPES:
        raise ValueError(f"{key} must be one of {TIMESTAMP_TYPES}, got {raw!r}")
    return str(raw)


def _compression_type(key: str, raw: Any) -> str:
    if raw not in COMPRESSION_TYPES:
        raise ValueError(f"{key} must be one of {', '.join(COMPRESSION_TYPES)}, got {raw!r}")
    return str(raw)


def _bool(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if str(raw).lower() in ("true", "false"):
        return str(raw).lower() == "true"
    raise ValueError(f"{key} must be true or false, got {raw!r}")


# topic key -> (LogConfig field, parser); minimums are Kafka's (TopicConfig / LogConfig validators)
_TOPIC_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "segment.bytes": ("segment_bytes", _at_least(14, INT_MAX)),
    "segment.ms": ("segment_ms", _at_least(1)),
    "segment.index.bytes": ("segment_index_bytes", _at_least(8, INT_MAX)),
    "index.interval.bytes": ("index_interval_bytes", _at_least(0, INT_MAX)),
    "retention.ms": ("retention_ms", _at_least(-1)),
    "retention.bytes": ("retention_bytes", _at_least(-1)),
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "delete.retention.ms": ("delete_retention_ms", _at_least(0)),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _at_least(0)),
    "max.message.bytes": ("max_message_bytes", _at_least(0, INT_MAX)),
    "flush.messages": ("flush_messages", _at_least(1)),
    "flush.ms": ("flush_ms", _at_least(0)),
    "message.timestamp.type": ("message_timestamp_type", _timestamp_type),
    "compression.type": ("compression_type", _compression_type),
    "min.insync.replicas": ("min_insync_replicas", _at_least(1, INT_MAX)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
}
TOPIC_CONFIG_KEYS: frozenset[str] = frozenset(_TOPIC_KEYS)

# broker key, topic key, multiplier to ms; ordered coarse to fine so the finer unit wins
_BROKER_KEYS: tuple[tuple[str, str, int], ...] = (
    ("log.segment.bytes", "segment.bytes", 1),
    ("log.roll.hours", "segment.ms", 3600000),
    ("log.roll.ms", "segment.ms", 1),
    ("log.index.size.max.bytes", "segment.index.bytes", 1),
    ("log.index.interval.bytes", "index.interval.bytes", 1),
    ("log.retention.hours", "retention.ms", 3600000),
    ("log.retention.minutes", "retention.ms", 60000),
    ("log.retention.ms", "retention.ms", 1),
    ("log.retention.bytes", "retention.bytes", 1),
    ("log.cleanup.policy", "cleanup.policy", 1),
    ("log.cleaner.delete.retention.ms", "delete.retention.ms", 1),
    ("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms", 1),
    ("message.max.bytes", "max.message.bytes", 1),
    ("log.flush.interval.messages", "flush.messages", 1),
    ("log.flush.interval.ms", "flush.ms", 1),
    ("log.message.timestamp.type", "message.timestamp.type", 1),
    ("compression.type", "compression.type", 1),
    ("min.insync.replicas", "min.insync.replicas", 1),
    ("unclean.leader.election.enable", "unclean.leader.election.enable", 1),
)

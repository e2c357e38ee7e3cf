"""LogConfig: Kafka defaults, topic and broker keys, validation errors naming the key."""

from __future__ import annotations

import pytest

from kraft.log.config import LONG_MAX, TOPIC_CONFIG_KEYS, LogConfig


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.retention_ms, c.retention_bytes) == (
        1073741824, 604800000, 604800000, -1,
    )
    assert (c.max_message_bytes, c.index_interval_bytes, c.segment_index_bytes) == (1048588, 4096, 10485760)
    assert c.flush_messages == c.flush_ms == LONG_MAX
    assert c.cleanup_policy == "delete" and c.delete and not c.compact
    assert c.message_timestamp_type == "CreateTime"
    assert c.compression_type == "producer" and c.target_compression is None


def test_topic_overrides_over_a_base() -> None:
    base = LogConfig(retention_ms=1000)
    c = LogConfig.from_topic_configs({"segment.bytes": "4096", "cleanup.policy": "delete,compact"}, base)
    assert c.segment_bytes == 4096 and c.retention_ms == 1000
    assert c.cleanup_policy == "compact,delete" and c.compact and c.delete
    assert LogConfig.from_topic_configs({"unclean.leader.election.enable": "true"}).unclean_leader_election_enable


@pytest.mark.parametrize(
    "key,value",
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", "10"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "forever"),
        ("message.timestamp.type", "Wallclock"),
        ("flush.messages", "0"),
        ("min.insync.replicas", "0"),
        ("unclean.leader.election.enable", "maybe"),
        ("no.such.key", "1"),
        ("compression.type", "none"),  # the producer's word; the topic's is "uncompressed"
        ("compression.type", "brotli"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_topic_configs({key: value})


def test_broker_keys_with_unit_precedence() -> None:
    c = LogConfig.from_broker_configs(
        {"log.retention.hours": "2", "log.segment.bytes": 2048, "num.partitions": 3}
    )
    assert c.retention_ms == 7_200_000 and c.segment_bytes == 2048
    assert LogConfig.from_broker_configs(
        {"log.retention.hours": 2, "log.retention.ms": 5}
    ).retention_ms == 5
    assert LogConfig.from_broker_configs({"log.retention.hours": -1}).retention_ms == -1


def test_to_topic_configs_round_trips_every_key() -> None:
    c = LogConfig(segment_bytes=12345, cleanup_policy="compact", unclean_leader_election_enable=True)
    shown = c.to_topic_configs()
    assert set(shown) == TOPIC_CONFIG_KEYS
    assert LogConfig.from_topic_configs(shown) == c


@pytest.mark.parametrize(
    "value,target",
    [("producer", None), ("uncompressed", "none"), ("gzip", "gzip"), ("snappy", "snappy"),
     ("lz4", "lz4"), ("zstd", "zstd")],
)
def test_compression_type_takes_kafkas_values(value: str, target: str | None) -> None:
    assert LogConfig.from_topic_configs({"compression.type": value}).target_compression == target
    assert LogConfig.from_broker_configs({"compression.type": value}).compression_type == value

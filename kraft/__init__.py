"""kraft: a replicated message broker shaped like Apache Kafka in KRaft mode.

The client is re-exported here, `from kraft import Producer, Consumer, Admin`, and imported only
when first asked for, so the node and the pure cores do not load it.
"""

from __future__ import annotations

from typing import Any

_CLIENT_NAMES = (
    "Admin",
    "BrokerInfo",
    "ClusterDescription",
    "Consumer",
    "ConsumerRecord",
    "CreatedTopic",
    "KraftError",
    "NewPartitions",
    "NewTopic",
    "NoBrokersAvailable",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "PartitionOffsets",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "TopicConfigs",
    "TopicDescription",
    "TopicListing",
    "TopicPartition",
)

__all__ = list(_CLIENT_NAMES)


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from kraft.api import client

        return getattr(client, name)
    raise AttributeError(f"module 'kraft' has no attribute {name!r}")

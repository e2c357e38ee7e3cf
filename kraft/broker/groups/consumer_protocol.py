"""Reading (and, for KIP-848 groups described to classic tools, writing) the embedded consumer
protocol of classic groups (Kafka's `ConsumerProtocol`): a
member's subscription (the JoinGroup metadata of protocol type "consumer") and its assignment (the
leader's SyncGroup bytes), each a 2-byte version and that version's struct, with kio's types.
A newer version than kio knows is read as the newest it knows (Kafka's rule: later versions only
append fields). Used to show a classic group's topics and owners; the broker never needs them
to run the protocol, so bytes that do not parse read as nothing.
"""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import ConsumerProtocolAssignment as AssignmentV0
from kio.schema.consumer_protocol_assignment.v1 import ConsumerProtocolAssignment as AssignmentV1
from kio.schema.consumer_protocol_assignment.v2 import ConsumerProtocolAssignment as AssignmentV2
from kio.schema.consumer_protocol_assignment.v3 import ConsumerProtocolAssignment as AssignmentV3
from kio.schema.consumer_protocol_subscription.v0 import ConsumerProtocolSubscription as SubscriptionV0
from kio.schema.consumer_protocol_subscription.v1 import ConsumerProtocolSubscription as SubscriptionV1
from kio.schema.consumer_protocol_subscription.v2 import ConsumerProtocolSubscription as SubscriptionV2
from kio.schema.consumer_protocol_subscription.v3 import ConsumerProtocolSubscription as SubscriptionV3
from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition as AssignedTopic
from kio.serial import entity_reader, entity_writer

CONSUMER_PROTOCOL_TYPE = "consumer"

_VERSION = struct.Struct(">h")
_SUBSCRIPTIONS = [entity_reader(t) for t in (SubscriptionV0, SubscriptionV1, SubscriptionV2, SubscriptionV3)]
_ASSIGNMENTS = [entity_reader(t) for t in (AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3)]


def _read(readers: list[Any], data: bytes) -> Any | None:
    if len(data) < _VERSION.size:
        return None
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        return None
    try:
        entity, _ = readers[min(version, len(readers) - 1)](data, _VERSION.size)
    except Exception:  # kio's readers raise several types for malformed input
        return None
    return entity


def subscribed_topics(metadata: bytes) -> tuple[str, ...] | None:
    """The topics of a member's subscription; None if the metadata does not parse."""
    entity = _read(_SUBSCRIPTIONS, metadata)
    return None if entity is None else tuple(str(t) for t in entity.topics)


def assigned_partitions(assignment: bytes) -> frozenset[tuple[str, int]]:
    """The partitions of a member's assignment (none if it is empty or does not parse)."""
    entity = _read(_ASSIGNMENTS, assignment)
    if entity is None:
        return frozenset()
    return frozenset((str(tp.topic), int(p)) for tp in entity.assigned_partitions for p in tp.partitions)


def _write(schema: Any, entity: Any) -> bytes:
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(0))
    entity_writer(schema)(buffer, entity)
    return buffer.getvalue()


def encode_subscription(topics: tuple[str, ...]) -> bytes:
    """A version-0 subscription, which every consumer reads."""
    return _write(SubscriptionV0, SubscriptionV0(topics=topics, user_data=None))


def encode_assignment(partitions: frozenset[tuple[str, int]] | set[tuple[str, int]]) -> bytes:
    """A version-0 assignment, which every consumer reads."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return _write(AssignmentV0, AssignmentV0(assigned_partitions=tuple(
        AssignedTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()), user_data=None))

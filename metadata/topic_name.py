"""Kafka's topic name rules (`org.apache.kafka.common.internals.Topic`) and the names kept from clients.

`__cluster_metadata` is the metadata log's own name (its directory is `__cluster_metadata-0`, the
same path a partition 0 of a topic of that name would get), so it is never a topic: not created,
not replayed. The internal topics (`__consumer_offsets`, `__transaction_state`, ...) exist, but
only the node itself creates, writes or deletes them; clients may read them.
"""

from __future__ import annotations

import re

from kraft.metadata.errors import MetadataError

MAX_NAME_LENGTH = 249
LEGAL_CHARACTERS = re.compile(r"[a-zA-Z0-9._-]+")  # one or more; schemas anchor it

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def validate_topic_name(name: object) -> str:
    """The name, or INVALID_TOPIC_EXCEPTION: 1..249 chars of [a-zA-Z0-9._-], not "." or ".."."""
    if not isinstance(name, str) or not name:
        raise MetadataError("INVALID_TOPIC_EXCEPTION", "topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise MetadataError("INVALID_TOPIC_EXCEPTION", "topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise MetadataError(
            "INVALID_TOPIC_EXCEPTION",
            f"topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
        )
    if not LEGAL_CHARACTERS.fullmatch(name):
        raise MetadataError(
            "INVALID_TOPIC_EXCEPTION",
            f"topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )
    if name == CLUSTER_METADATA_TOPIC:
        raise MetadataError("INVALID_REQUEST", f"{name} is the metadata log's name and cannot be a topic")
    return name


def is_internal(name: str) -> bool:
    """Kafka's `Topic.isInternal`: topics the node keeps for itself."""
    return name in INTERNAL_TOPICS


def check_client_topic(name: object, action: str) -> str:
    """The name, when a client may `action` ("create", "produce to", "delete", "add partitions to")
    a topic of that name; INVALID_TOPIC_EXCEPTION for a produce to an internal topic (Kafka's
    "Cannot append to internal topic"), INVALID_REQUEST for the other actions."""
    validate_topic_name(name)
    assert isinstance(name, str)
    if is_internal(name):
        if action == "produce to":
            raise MetadataError("INVALID_TOPIC_EXCEPTION", f"Cannot append to internal topic {name}")
        raise MetadataError("INVALID_REQUEST", f"{name} is an internal topic: clients cannot {action} it")
    return name


def collision_key(name: str) -> str:
    """Names equal under this key collide in metric names ("a.b" and "a_b"), which Kafka refuses."""
    return name.replace(".", "_")

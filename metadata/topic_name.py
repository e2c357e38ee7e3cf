"""Kafka's topic name rules (`org.apache.kafka.common.internals.Topic`)."""

from __future__ import annotations

import re

from metadata.errors import MetadataError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


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
    if not _LEGAL.fullmatch(name):
        raise MetadataError(
            "INVALID_TOPIC_EXCEPTION",
            f"topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )
    return name


def collision_key(name: str) -> str:
    """Names equal under this key collide in metric names ("a.b" and "a_b"), which Kafka refuses."""
    return name.replace(".", "_")

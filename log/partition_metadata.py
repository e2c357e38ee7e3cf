"""`partition.metadata`: the topic id a partition directory belongs to (Kafka's
PartitionMetadataFile, the same text format).

```
version: 0
topic_id: <the topic id as Kafka prints a Uuid: URL-safe base64 of its 16 bytes, no padding>
```

A topic's name can be reused after it is deleted; its id cannot. A directory whose file names
another id than the metadata's for that name is a leftover of an earlier topic and must never be
served as the new one (`InconsistentTopicIdError`; the broker sets it aside as stray). A directory
without the file (written by an older kraft) adopts the metadata's id.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from kraft.log.checkpoint import write_atomic
from kraft.log.errors import LogError

PARTITION_METADATA = "partition.metadata"
_VERSION = 0


class InconsistentTopicIdError(LogError):
    """The directory holds another topic's partition (Kafka's INCONSISTENT_TOPIC_ID)."""

    error_code = "INCONSISTENT_TOPIC_ID"

    def __init__(self, directory: Path, found: str, expected: str) -> None:
        super().__init__(f"{directory} belongs to topic id {found}, not {expected}")
        self.directory = directory
        self.found = found
        self.expected = expected


def kafka_topic_id(topic_id: str) -> str:
    """How Kafka writes the id (`Uuid.toString`); an id that is not a UUID is written as is."""
    try:
        raw = uuid.UUID(topic_id).bytes
    except ValueError:
        return topic_id
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_topic_id(directory: Path) -> str | None:
    """The Kafka-form topic id the directory's file names; None without a (readable) file."""
    try:
        text = (directory / PARTITION_METADATA).read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    found = fields.get("topic_id", "").strip()
    return found or None


def write_topic_id(directory: Path, topic_id: str, sync: bool) -> None:
    body = f"version: {_VERSION}\ntopic_id: {kafka_topic_id(topic_id)}\n"
    write_atomic(directory / PARTITION_METADATA, body.encode(), sync=sync)


def check_topic_id(directory: Path, topic_id: str) -> bool:
    """Raises InconsistentTopicIdError when the directory belongs to another topic id; returns
    whether it has no file yet (an older kraft wrote it, or it does not exist)."""
    found = read_topic_id(directory)
    if found is None:
        return True
    if found != kafka_topic_id(topic_id):
        raise InconsistentTopicIdError(directory, found, kafka_topic_id(topic_id))
    return False


def sync_topic_id(directory: Path) -> None:
    """fsyncs the file written without sync at the log's first append."""
    fd = os.open(directory / PARTITION_METADATA, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

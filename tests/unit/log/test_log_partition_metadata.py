"""`partition.metadata` (issue 22 item 13): every partition directory records its topic id in
Kafka's format, written when the log creates its directory; a directory of another topic id is
refused before anything of it is read; one written by an older kraft adopts the id."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest

from kraft.log.config import LogConfig
from kraft.log.partition_log import PartitionLog
from kraft.log.partition_metadata import PARTITION_METADATA, InconsistentTopicIdError, kafka_topic_id
from log_testing import make_batch

TOPIC_ID = "3f2b8c1e-7d4a-4e0b-9a61-5c2d8e9f0a17"


def test_the_file_is_kafkas_format() -> None:
    encoded = kafka_topic_id(TOPIC_ID)
    assert len(encoded) == 22 and "=" not in encoded  # Uuid.toString: URL-safe base64, no padding
    assert base64.urlsafe_b64decode(encoded + "==") == uuid.UUID(TOPIC_ID).bytes


def test_written_with_the_directory_at_the_first_append(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig(), 0, topic_id=TOPIC_ID)
    assert not directory.exists()  # a lazy log creates nothing until its first append
    log.append_as_leader(make_batch(2), 0, 0)
    log.close()
    assert (directory / PARTITION_METADATA).read_text() == (
        f"version: 0\ntopic_id: {kafka_topic_id(TOPIC_ID)}\n")
    PartitionLog.open(directory, LogConfig(), 0, topic_id=TOPIC_ID).close()


def test_another_topic_ids_directory_is_refused_before_it_is_read(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    old = PartitionLog.open(directory, LogConfig(), 0, topic_id=TOPIC_ID)
    old.append_as_leader(make_batch(50), 0, 0)
    old.close()
    other = str(uuid.uuid4())
    with pytest.raises(InconsistentTopicIdError) as raised:
        PartitionLog.open(directory, LogConfig(), 0, topic_id=other)
    assert raised.value.error_code == "INCONSISTENT_TOPIC_ID"
    assert kafka_topic_id(TOPIC_ID) in str(raised.value) and kafka_topic_id(other) in str(raised.value)


def test_a_directory_without_the_file_adopts_the_id(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    older = PartitionLog.open(directory, LogConfig(), 0)  # an older kraft: no topic id
    older.append_as_leader(make_batch(3), 0, 0)
    older.close()
    assert not (directory / PARTITION_METADATA).exists()
    adopted = PartitionLog.open(directory, LogConfig(), 0, topic_id=TOPIC_ID)
    try:
        assert adopted.log_end_offset == 3
    finally:
        adopted.close()
    with pytest.raises(InconsistentTopicIdError):
        PartitionLog.open(directory, LogConfig(), 0, topic_id=str(uuid.uuid4()))

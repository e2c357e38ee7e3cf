"""Pure helpers of the consumer's fetch path: the `POST /v1/fetch` body, and turning one
partition's raw batch bytes into ConsumerRecords from the fetch position on."""

from __future__ import annotations

from typing import Any

from api.client.types import ConsumerRecord, TopicPartition
from log.batch import decode_records, iter_batches


def fetch_body(
    positions: dict[TopicPartition, int],
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
) -> dict[str, Any]:
    return {
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "fetch_offset": offset, "partition_max_bytes": partition_max_bytes}
            for tp, offset in positions.items()
        ],
    }


def records_from_batches(tp: TopicPartition, data: bytes, fetch_offset: int) -> tuple[list[ConsumerRecord], int]:
    """Decodes the complete batches of `data` (CRC checked), drops records below `fetch_offset`
    (a fetch starts at the batch containing it), and returns them with the next fetch offset
    (after the last complete batch, so compacted gaps are skipped). Raises CorruptRecordError."""
    records: list[ConsumerRecord] = []
    next_offset = fetch_offset
    topic, partition = tp
    for pos, header in iter_batches(data):
        if header.last_offset < next_offset:
            continue
        for r in decode_records(data, pos):
            if r.offset >= fetch_offset:
                records.append(ConsumerRecord(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers))
        next_offset = header.last_offset + 1
    return records, next_offset

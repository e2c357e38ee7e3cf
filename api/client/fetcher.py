"""Pure helpers of the consumer's fetch path: the `POST /v1/fetch` body, and turning one
partition's raw batch bytes into ConsumerRecords from the fetch position on.

Decoding is the consumer's hot path: each batch is decoded column-wise (`kraft.log.records.
decode_columns`: for kraft's batches C-speed msgpack and type checks, with no Python code run per
record; a Kafka producer's v2 batch, stored as sent, is parsed in Python) and its records are
built by `map` over the columns. Transaction markers are skipped; for read_committed so are the batches of the
aborted transactions the answer names (`log/isolation.py`, Kafka's consumer rule).
"""

from __future__ import annotations

import gc
from bisect import bisect_left
from functools import partial
from itertools import islice, repeat
from typing import Any, Iterable

from kraft.api.client.types import ConsumerRecord, TopicPartition
from kraft.log.records import decode_columns
from kraft.log.isolation import readable_batches

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)

# ConsumerRecord from a 7-tuple without its Python-level __new__ (NamedTuple fields are positional).
_make_record = partial(tuple.__new__, ConsumerRecord)


def fetch_body(
    positions: dict[TopicPartition, int],
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: str = READ_UNCOMMITTED,
) -> dict[str, Any]:
    return {
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "fetch_offset": offset, "partition_max_bytes": partition_max_bytes}
            for tp, offset in positions.items()
        ],
    }


def records_from_batches(
    tp: TopicPartition, data: bytes, fetch_offset: int, aborted: Iterable[tuple[int, int]] | None = None,
) -> tuple[list[ConsumerRecord], int]:
    """Decodes the complete batches of `data` (CRC checked), drops records below `fetch_offset`
    (a fetch starts at the batch containing it), markers and, with `aborted` (a read_committed
    answer's (producer id, first offset) pairs), aborted transactions' batches, and returns them
    with the next fetch offset (after the last complete batch, so compacted gaps, markers and
    aborted batches are skipped). Raises CorruptRecordError.

    The cyclic garbage collector is paused meanwhile, as msgpack's documentation advises for
    large unpacks: thousands of new long-lived records would otherwise trigger collections that
    scan the whole heap (ConsumerRecords, being tuple subclasses, are never untracked)."""
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        return _decode(tp, data, fetch_offset, aborted)
    finally:
        if collecting:
            gc.enable()


def _decode(tp: TopicPartition, data: bytes, fetch_offset: int,
            aborted: Iterable[tuple[int, int]] | None) -> tuple[list[ConsumerRecord], int]:
    records: list[ConsumerRecord] = []
    next_offset = fetch_offset
    topic, partition = tp
    for pos, header, visible in readable_batches(data, aborted):
        if header.last_offset < next_offset:
            continue
        if not visible:
            next_offset = header.last_offset + 1
            continue
        columns = decode_columns(data, pos)
        rows = zip(repeat(topic), repeat(partition), *columns[1:])
        skip = bisect_left(columns.offsets, fetch_offset) if columns.offsets and columns.offsets[0] < fetch_offset else 0
        records.extend(map(_make_record, islice(rows, skip, None) if skip else rows))
        next_offset = header.last_offset + 1
    return records, next_offset

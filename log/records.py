"""A log's records in either stored format: one dispatch on the magic byte (pure).

A log holds kraft's batches (magic 0x4B, log/batch.py) and Kafka's RecordBatch v2 (magic 2,
log/kafka_batch.py) side by side, each as its writer sent it; both share the 61-byte header, so
offsets, epochs, producer state and indexes never look at the format. Whatever reads records
(compaction, markers, coordinators, the JSON routes, the Python client, the Spark source) decodes
through here; a batch of any other magic is corrupt (CorruptRecordError).
"""

from __future__ import annotations

from typing import Sequence

from kraft.log import kafka_batch
from kraft.log import batch as kraft_batch
from kraft.log.batch import MAGIC_V2, STORED_MAGICS, BatchColumns, BatchHeader, Record, validate_stored

_MAGIC_POS = 16


def _is_v2(buf: bytes | bytearray | memoryview, pos: int) -> bool:
    """Whether the batch at `pos` says magic 2; a short one goes to kraft's decoder, whose
    framing check names the problem."""
    if len(buf) - pos <= _MAGIC_POS:
        return False
    magic = buf[pos + _MAGIC_POS]
    if magic not in STORED_MAGICS:
        validate_stored(buf, pos)  # raises CorruptRecordError: no log stores this magic
    return magic == MAGIC_V2


def decode_columns(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchColumns:
    """The batch at `pos`, validated and decoded column-wise (offsets and timestamps absolute)."""
    if _is_v2(buf, pos):
        return kafka_batch.decode_columns(buf, pos)
    return kraft_batch.decode_columns(buf, pos)


def decode_records(buf: bytes | bytearray | memoryview, pos: int = 0) -> list[Record]:
    """The batch at `pos`, validated and decoded into records (offsets and timestamps absolute)."""
    return list(map(Record, *decode_columns(buf, pos)[1:]))


def encode_like(header: BatchHeader, records: Sequence[Record], base_timestamp: int, max_timestamp: int) -> bytes:
    """A batch in `header`'s format holding `records` (a subset of its own: every offset kept)
    with its fields: base and last offset, attributes (codec included), leader epoch, producer
    id, epoch and base sequence; only the timestamps are the caller's (the cleaner's rewrite)."""
    base_offset = header.base_offset
    last_offset_delta = header.last_offset - base_offset
    if header.magic == MAGIC_V2:
        return kafka_batch.encode_batch(
            records, base_offset=base_offset, compression=header.compression,
            base_timestamp=base_timestamp, max_timestamp=max_timestamp, attributes=header.attributes,
            last_offset_delta=last_offset_delta, partition_leader_epoch=header.partition_leader_epoch,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
        )
    rows = [
        [r.offset - base_offset, r.timestamp - base_timestamp, r.key, r.value, list(r.headers)]
        for r in records
    ]
    return kraft_batch.encode_batch(
        rows, base_offset=base_offset, last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp, max_timestamp=max_timestamp, attributes=header.attributes,
        partition_leader_epoch=header.partition_leader_epoch, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
    )

"""The per-record parse of a producer's uncompressed v2 batch at C speed, where aiokafka's Cython
record codec is importable (pure).

Kafka's LogValidator parses every record a producer sends; in Python (`kafka_batch._decode_rows`)
that parse was most of the Kafka listener's produce path. aiokafka ships Kafka's record codec in
Cython: its `DefaultRecordBatch` parses the records and its `DefaultRecordBatchBuilder` encodes
them again. Its parser is more lenient than Kafka's in corners (record attributes read as a
varint, varints of any length up to 10 bytes, a negative key or value length of any size read as
null), so its answer alone is never the verdict: the records are encoded again and must give the
very bytes that were sent. Kafka's encoding is canonical, so equal bytes mean every field was
read as the Python parser reads it, and the Python parser would take the same records; anything
else (a refusal by aiokafka, other bytes, a compressed or LogAppendTime batch, no aiokafka) is
`None`, and the Python parser decides, with its own error. Either way the verdict is the Python
parser's; this only makes the common case fast (tests/unit/log/test_log_kafka_fast_parse.py holds
the two to the same answers).
"""

from __future__ import annotations

from collections import deque
from functools import cache
from itertools import repeat
from operator import attrgetter, sub
from typing import Any

from kraft.log.batch import HEADER_SIZE, BatchHeader

AVAILABLE = True  # False: the Python parser decides every batch (tests compare the two)


@cache
def codec() -> tuple[Any, Any] | None:
    """aiokafka's (DefaultRecordBatch, DefaultRecordBatchBuilder), or None without it (or without
    its C extensions). Imported at the first produced batch, not when the node starts: aiokafka
    pulls in its whole client, which a node that never serves a Kafka producer has no use for."""
    try:
        from aiokafka.record._crecords.default_records import (  # type: ignore[import-not-found]
            DefaultRecordBatch,
            DefaultRecordBatchBuilder,
        )
    except ImportError:
        return None
    return DefaultRecordBatch, DefaultRecordBatchBuilder

# aiokafka's parser reads a varint's bytes before checking its bounds: an over-read past a
# truncated records section must land on zeros of our own allocation (a varint ends at a zero)
_PADDING = 32
_INT64 = (-(2**63), 2**63 - 1)
_FIRST_SIZE = 7  # length 6, then attributes, timestamp and offset deltas 0, null key and value, no headers
_FIELDS = tuple(map(attrgetter, ("timestamp", "key", "value", "headers")))


def timestamp_deltas_and_keys(
    batch: bytes | bytearray | memoryview, header: BatchHeader
) -> tuple[list[int], list[bytes | None]] | None:
    """The records' timestamp deltas and keys when aiokafka's parse of the uncompressed batch
    (framing and CRC already checked) re-encodes to the same bytes with offset deltas 0..n-1;
    else None (the Python parser decides)."""
    if not AVAILABLE or header.compression_code or header.is_log_append_time:
        return None  # LogAppendTime: aiokafka reads every record's timestamp as the max one
    classes = codec()
    if classes is None:
        return None
    DefaultRecordBatch, DefaultRecordBatchBuilder = classes
    size = header.size_in_bytes
    padded = bytearray(size + _PADDING)
    padded[:size] = batch
    try:
        records = list(DefaultRecordBatch(memoryview(padded)[:size]))
    except Exception:  # noqa: BLE001 - whatever aiokafka refuses, the Python parser names
        return None
    timestamps, keys, values, headers = (list(map(field, records)) for field in _FIELDS)
    # aiokafka reads NO_TIMESTAMP as None, and adds the delta to the base in 64 bits: a delta
    # out of int64 here is one that wrapped, which the Python parser reads unwrapped
    if None in timestamps:
        timestamps = [-1 if t is None else t for t in timestamps]
    deltas = list(map(sub, timestamps, repeat(header.base_timestamp)))
    if min(deltas) < _INT64[0] or max(deltas) > _INT64[1]:
        return None
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2 * size + _FIRST_SIZE)  # never full
    # the builder's timestamp deltas count from its first record's: a first record at 0 makes
    # them the deltas themselves (it encodes to the _FIRST_SIZE bytes skipped below)
    builder.append(0, 0, None, None, [])
    # one C call a record, no Python loop: encoding again is the check's whole cost
    deque(map(builder.append, range(len(records)), deltas, keys, values, headers), maxlen=0)
    if builder.build()[HEADER_SIZE + _FIRST_SIZE:] != padded[HEADER_SIZE:size]:
        return None
    return deltas, keys

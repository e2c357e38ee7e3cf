"""The per-record parse of a producer's v2 batch at C speed, where aiokafka's Cython record codec
is loaded (pure).

Kafka's LogValidator parses every record a producer sends; in Python (`kafka_batch._decode_rows`)
that parse was most of the Kafka listener's produce path. aiokafka ships Kafka's record codec in
Cython: its `DefaultRecordBatch` parses the records and its `DefaultRecordBatchBuilder` encodes
them again. Its parser is more lenient than Kafka's in corners (record attributes read as a
varint, varints of any length up to 10 bytes, a negative key or value length of any size read as
null), so its answer alone is never the verdict: the records are encoded again and must give the
very bytes that were sent (decompressed, for a compressed batch). Kafka's encoding is canonical,
so equal bytes mean every field was read as the Python parser reads it, and the Python parser
would take the same records; anything else (a refusal by aiokafka, other bytes, a payload that
does not decompress, no aiokafka) is `None`, and the Python parser decides, with its own error.
Either way the verdict is the Python parser's; this only makes the common case fast
(tests/unit/log/test_log_kafka_fast_parse.py holds the two to the same answers).

aiokafka's codec is imported by `load`, which imports aiokafka's whole client (~25 ms of CPU in a
node, more under load): the node calls it in a thread at its first Produce request
(kraft/kafka/apis/produce_api.py), and until it is loaded the Python parser decides every batch,
so neither a starting node nor a produced batch waits for that import.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from operator import attrgetter, sub
from typing import Any

from kraft.log.batch import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_FLAG,
    BatchHeader,
    decompress_payload,
)
from kraft.log.errors import CorruptRecordError, InvalidRecordError

AVAILABLE = True  # False: the Python parser decides every batch (tests compare the two)
_codec: tuple[Any, Any] | None = None  # aiokafka's (DefaultRecordBatch, DefaultRecordBatchBuilder), once loaded


def load() -> bool:
    """Imports aiokafka's codec (blocking: call it from a thread); False without aiokafka or its
    C extensions."""
    global _codec
    if _codec is None:
        try:
            from aiokafka.record._crecords.default_records import (  # type: ignore[import-not-found]
                DefaultRecordBatch,
                DefaultRecordBatchBuilder,
            )
        except ImportError:
            return False
        _codec = DefaultRecordBatch, DefaultRecordBatchBuilder
    return True


def loaded() -> bool:
    return _codec is not None


# aiokafka's parser reads a varint's bytes before checking its bounds (a header key's length with
# no check at all: up to 10 bytes past the records' end), so it never reads the request's own
# buffer: the records are copied into one of ours, zeros after them (a varint ends at a zero)
_PADDING = 32
_INT64 = (-(2**63), 2**63 - 1)
_FIRST_SIZE = 7  # length 6, then attributes, timestamp and offset deltas 0, null key and value, no headers
_FIELDS = tuple(map(attrgetter, ("timestamp", "key", "value", "headers")))
# the attributes' low byte without the codec and the timestamp type: aiokafka is given the records
# as they are, decompressed, and reads each record's own timestamp (with LogAppendTime set it
# reads every one as the batch's max timestamp)
_AS_PLAIN = 0xFF & ~(COMPRESSION_MASK | TIMESTAMP_TYPE_FLAG)


def timestamp_deltas_and_keys(
    batch: bytes | bytearray | memoryview, header: BatchHeader
) -> tuple[list[int], list[bytes | None]] | None:
    """The records' timestamp deltas and keys when aiokafka's parse of the batch's records (framing
    and CRC already checked; decompressed once here) re-encodes to the same bytes with offset
    deltas 0..n-1; else None (the Python parser decides)."""
    if not AVAILABLE or _codec is None:
        return None
    DefaultRecordBatch, DefaultRecordBatchBuilder = _codec
    if header.compression_code:
        try:
            records: bytes | memoryview = decompress_payload(batch, 0, header)
        except (CorruptRecordError, InvalidRecordError):
            return None  # the Python parser decompresses again and names the error
    else:
        records = memoryview(batch)[HEADER_SIZE:header.size_in_bytes]
    end = HEADER_SIZE + len(records)
    padded = bytearray(end + _PADDING)
    padded[:HEADER_SIZE] = memoryview(batch)[:HEADER_SIZE]
    padded[ATTRIBUTES_POS + 1] &= _AS_PLAIN
    padded[HEADER_SIZE:end] = records
    try:
        parsed = list(DefaultRecordBatch(memoryview(padded)[:end]))
    except Exception:  # noqa: BLE001 - whatever aiokafka refuses, the Python parser names
        return None
    timestamps, keys, values, headers = (list(map(field, parsed)) for field in _FIELDS)
    # aiokafka reads NO_TIMESTAMP as None, and adds the delta to the base in 64 bits: a delta
    # out of int64 here is one that wrapped, which the Python parser reads unwrapped
    if None in timestamps:
        timestamps = [-1 if t is None else t for t in timestamps]
    deltas = list(map(sub, timestamps, repeat(header.base_timestamp)))
    if min(deltas) < _INT64[0] or max(deltas) > _INT64[1]:
        return None
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2 * end + _FIRST_SIZE)  # never full
    # the builder's timestamp deltas count from its first record's: a first record at 0 makes
    # them the deltas themselves (it encodes to the _FIRST_SIZE bytes skipped below)
    builder.append(0, 0, None, None, [])
    # one C call a record, no Python loop: encoding again is the check's whole cost
    deque(map(builder.append, range(len(parsed)), deltas, keys, values, headers), maxlen=0)
    if builder.build()[HEADER_SIZE + _FIRST_SIZE:] != padded[HEADER_SIZE:end]:
        return None
    return deltas, keys

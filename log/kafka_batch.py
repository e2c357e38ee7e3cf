"""Kafka's RecordBatch v2 (magic 2): codec, LogValidator rules, conversions to and from kraft's (pure).

A v2 batch has kraft's 61-byte header (log/batch.py: the same fields, offsets and CRC-32C range),
magic 2, and records in Kafka's encoding, optionally compressed as a whole (log/compression.py):
each record is `length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
keyLength varint, key, valueLength varint, value, headerCount varint, headers` with zigzag varints,
-1 lengths for null, header keys UTF-8. A producer's batch is checked here and stored as sent
(`validate_for_append`); a reader in the other format gets a converted copy (`to_kraft`,
`from_kraft`), never the log. See docs/internals.md, "Kafka's v2 batches".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kraft.log import compression as codec
from kraft.log import kafka_fast_parse
from kraft.log.batch import (
    ATTRIBUTES_POS,
    CONTROL_FLAG,
    HEADER_SIZE,
    MAGIC_V2,
    MAX_DECOMPRESSED_BYTES,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    BatchColumns,
    BatchHeader,
    Record,
    columns_of,
    compute_crc,
    decode_records as decode_kraft_records,
    encode_batch as encode_kraft_batch,
    reframe,
    validate_batch,
)
from kraft.log.config import LONG_MAX, LogConfig
from kraft.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)

# Kafka's message.timestamp.before.max.ms / after.max.ms defaults (Kafka 4.0: KIP-1030)
TIMESTAMP_BEFORE_MAX_MS = LONG_MAX
TIMESTAMP_AFTER_MAX_MS = 3_600_000

_CRC_POS = 17
_MAX_TIMESTAMP_POS = 35
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

Headers = tuple[tuple[str, bytes | None], ...]


def validate_framing(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the v2 batch at `pos` after checking its length, magic and CRC."""
    return validate_batch(buf, pos, magic=MAGIC_V2)


# -- varints (Kafka's ByteUtils: zigzag, 7 bits a byte, low group first) ------------------------


def _zigzag(value: int, bounds: tuple[int, int]) -> int:
    if not bounds[0] <= value <= bounds[1]:
        raise InvalidRecordError(f"{value} does not fit a Kafka varint of its field")
    return (value << 1) ^ (value >> 63)


def _write_varint(out: bytearray, value: int, bounds: tuple[int, int] = _INT32) -> None:
    n = _zigzag(value, bounds)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_varint(buf: bytes, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    if pos + 1 < end and buf[pos + 1] < 0x80:  # at most two bytes: record and value lengths
        result = buf[pos]
        if result & 0x80:
            result = (result & 0x7F) | (buf[pos + 1] << 7)
            return (result >> 1) ^ -(result & 1), pos + 2
        return (result >> 1) ^ -(result & 1), pos + 1
    result = shift = 0
    for i in range(pos, min(end, pos + max_bytes)):
        byte = buf[i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), i + 1
        shift += 7
    if end - pos < max_bytes:
        raise CorruptRecordError("record ends inside a varint")
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    b = buf[pos] if pos < end else 0x80  # one-byte lengths inline; the rest (and a cut) below
    if b < 0x80:
        length, pos = (b >> 1) ^ -(b & 1), pos + 1
    else:
        length, pos = _read_varint(buf, pos, end)
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise CorruptRecordError(f"record field of length {length} does not fit its record")
    return buf[pos:pos + length], pos + length


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


# -- records ------------------------------------------------------------------------------------


def encode_records(
    records: Sequence[tuple[int, int, bytes | None, bytes | None, Headers]]
) -> bytearray:
    """The uncompressed records section from `(offset_delta, timestamp_delta, key, value,
    headers)` rows."""
    out = bytearray()
    body = bytearray()
    for offset_delta, timestamp_delta, key, value, headers in records:
        body.clear()
        body.append(0)  # record attributes: unused by Kafka
        _write_varint(body, timestamp_delta, _INT64)
        _write_varint(body, offset_delta)
        _write_bytes(body, key)
        _write_bytes(body, value)
        _write_varint(body, len(headers))
        for name, header_value in headers:
            _write_bytes(body, name.encode())
            _write_bytes(body, header_value)
        _write_varint(out, len(body))
        out += body
    return out


def _decode_rows(
    payload: bytes | bytearray | memoryview, count: int
) -> list[tuple[int, int, bytes | None, bytes | None, Headers]]:
    """Parses exactly `count` records filling `payload` (strict: every length must agree).

    Every record a Kafka producer sends is parsed here (validation, and the Python client's
    decoding), so one-byte varints, the common case, are read inline; a field that runs past its
    record shows as a record whose fields do not end where its length says."""
    data = bytes(payload)
    end = len(data)
    rows = []
    pos = 0
    try:
        for index in range(count):
            if pos >= end:
                raise CorruptRecordError(f"batch declares {count} records but holds {index}")
            b = data[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = _read_varint(data, pos, end)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise CorruptRecordError(f"record of length {length} overruns the batch")
            b = data[pos + 1]  # after the attributes
            if b < 0x80:
                timestamp_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                timestamp_delta, pos = _read_varint(data, pos + 1, record_end, 10)
            b = data[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                offset_delta, pos = _read_varint(data, pos, record_end)
            b = data[pos]
            if b == 1:  # a null key, the common case
                key, pos = None, pos + 1
            else:
                key, pos = _read_bytes(data, pos, record_end)
            value, pos = _read_bytes(data, pos, record_end)
            b = data[pos]
            if b == 0:
                headers: Headers = ()
                pos += 1
            else:
                headers, pos = _read_headers(data, pos, record_end)
            if pos != record_end:
                raise CorruptRecordError(f"record declares {length} bytes but holds {length + pos - record_end}")
            rows.append((offset_delta, timestamp_delta, key, value, headers))
    except IndexError:
        raise CorruptRecordError("a record ends inside a field") from None
    if pos != end:
        raise CorruptRecordError(f"batch declares {count} records but has {end - pos} bytes after them")
    return rows


def _read_headers(data: bytes, pos: int, end: int) -> tuple[Headers, int]:
    header_count, pos = _read_varint(data, pos, end)
    if header_count < 0:
        raise CorruptRecordError(f"negative header count {header_count}")
    headers = []
    for _ in range(header_count):
        name, pos = _read_bytes(data, pos, end)
        if name is None:
            raise CorruptRecordError("record header with a null key")
        header_value, pos = _read_bytes(data, pos, end)
        try:
            headers.append((name.decode(), header_value))
        except UnicodeDecodeError:
            raise CorruptRecordError("record header key is not UTF-8") from None
    return tuple(headers), pos


def _rows(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, max_bytes: int
) -> list[tuple[int, int, bytes | None, bytes | None, Headers]]:
    if header.record_count < 0:
        raise CorruptRecordError(f"batch declares {header.record_count} records")
    body = memoryview(buf)[pos + HEADER_SIZE:pos + header.size_in_bytes]
    return _decode_rows(codec.decompress(header.compression_code, body, max_bytes), header.record_count)


def decode_columns(
    buf: bytes | bytearray | memoryview, pos: int = 0, max_bytes: int = MAX_DECOMPRESSED_BYTES
) -> BatchColumns:
    """Validates the v2 batch at `pos` and decodes it column-wise with absolute offsets and
    timestamps (LogAppendTime: the batch's max timestamp, as Kafka's readers take it), as
    `log.batch.decode_columns` does a kraft batch."""
    header = validate_framing(buf, pos)
    rows = _rows(buf, pos, header, max_bytes)
    if not rows:
        return BatchColumns(header, (), (), (), (), ())
    return columns_of(header, *zip(*rows))


def decode_records(
    buf: bytes | bytearray | memoryview, pos: int = 0, max_bytes: int = MAX_DECOMPRESSED_BYTES
) -> list[Record]:
    """Validates the v2 batch at `pos` and returns its records (see `decode_columns`)."""
    return list(map(Record, *decode_columns(buf, pos, max_bytes)[1:]))


# -- building batches ---------------------------------------------------------------------------


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    compression: str = "none",
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A v2 batch of `records` (absolute offsets and timestamps; gaps kept, as compaction leaves
    them). Timestamps default to the first record's and the largest; `attributes` carries the
    timestamp type and the transactional and control bits, `compression` the codec."""
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    if compression not in codec.CODES:
        raise InvalidRecordError(f"unknown compression {compression!r}; use one of {tuple(codec.CODES)}")
    first = records[0].timestamp if base_timestamp is None else base_timestamp
    payload = encode_records(
        [(r.offset - base_offset, r.timestamp - first, r.key, r.value, r.headers) for r in records]
    )
    header = BatchHeader(
        base_offset, 0, partition_leader_epoch, MAGIC_V2, 0, attributes,
        records[-1].offset - base_offset if last_offset_delta is None else last_offset_delta,
        first, max(r.timestamp for r in records) if max_timestamp is None else max_timestamp,
        producer_id, producer_epoch, base_sequence, len(records),
    )
    return reframe(header, payload, codec.CODES[compression])


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None, Any, int]],
    *,
    compression: str = "none",
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A producer's v2 batch from `(key, value, headers, timestamp_ms)` tuples, as
    `log.batch.build_batch` builds kraft's."""
    return encode_batch(
        [Record(base_offset + i, ts, key, value, tuple(headers or ()))
         for i, (key, value, headers, ts) in enumerate(records)],
        base_offset=base_offset, compression=compression, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence,
        attributes=TRANSACTIONAL_FLAG if transactional else 0,
    )


# -- Kafka's LogValidator for magic 2 -----------------------------------------------------------


def validate_for_append(
    batch: bytes | bytearray | memoryview,
    config: LogConfig,
    now_ms: int,
    *,
    timestamp_before_max_ms: int = TIMESTAMP_BEFORE_MAX_MS,
    timestamp_after_max_ms: int = TIMESTAMP_AFTER_MAX_MS,
    framed: BatchHeader | None = None,
) -> bytes | bytearray | memoryview:
    """Checks one producer v2 batch as Kafka's LogValidator does and returns what to store: the
    batch itself when nothing needs changing (the usual case), else a copy with the header's max
    timestamp corrected (CreateTime), the append time stamped (LogAppendTime: flag and max
    timestamp, CRC recomputed) or the records recompressed to the topic's compression.type.
    Offsets and the leader epoch are stamped later, outside the CRC (`log.batch.stamp`).

    Raises CorruptRecordError (framing, CRC, malformed records), RecordTooLargeError
    (max.message.bytes), InvalidRecordError (counts, offsets, codec, control batches, sequence,
    keyless records on compacted topics), InvalidTimestampError (CreateTime outside
    message.timestamp.before/after.max.ms). `framed`: the batch's header when the caller has
    checked its framing and CRC already (LogValidator does, for both formats)."""
    header = validate_framing(batch) if framed is None else framed
    if header.size_in_bytes != len(batch):
        raise CorruptRecordError(f"{len(batch) - header.size_in_bytes} bytes after the batch")
    _check_size(header, config)
    count = header.record_count
    if count <= 0:
        raise InvalidRecordError(f"invalid reported count for record batch: {count}")
    if header.last_offset_delta != count - 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range: last offset delta {header.last_offset_delta} "
            f"for {count} records"
        )
    if header.attributes & CONTROL_FLAG:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.attributes & TRANSACTIONAL_FLAG and header.producer_id < 0:
        raise InvalidRecordError("a transactional batch needs a producer id")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(f"invalid sequence number {header.base_sequence} for producer {header.producer_id}")
    codec.name(header.compression_code)  # InvalidRecordError for codes 5-7
    target = config.target_compression
    recompress = target is not None and codec.CODES[target] != header.compression_code
    # the per-record rules column-wise, at C speed (every produced record passes here)
    fast = None if recompress else kafka_fast_parse.timestamp_deltas_and_keys(batch, header)
    if fast is not None:  # offset deltas 0..n-1 already, the records as the Python parser reads them
        timestamp_deltas, keys = fast
    else:
        rows = _rows(batch, 0, header, MAX_DECOMPRESSED_BYTES)
        offset_deltas, timestamp_deltas, keys, _, _ = zip(*rows)
        if offset_deltas != tuple(range(count)):
            expected = next(i for i, delta in enumerate(offset_deltas) if delta != i)
            raise InvalidRecordError(f"record has offset delta {offset_deltas[expected]}, expected {expected}")
    if config.compact and None in keys:
        raise InvalidRecordError("compacted topic cannot accept a record without a key")
    base = header.base_timestamp
    distinct = sorted(set(timestamp_deltas))
    max_timestamp = max(NO_TIMESTAMP, base + distinct[-1])
    if not config.log_append_time:
        # the earliest and the latest are the only ones a bound can refuse (NO_TIMESTAMP is exempt)
        earliest = distinct[1] if base + distinct[0] == NO_TIMESTAMP and len(distinct) > 1 else distinct[0]
        for timestamp in (base + earliest, base + distinct[-1]):
            _check_timestamp(timestamp, now_ms, timestamp_before_max_ms, timestamp_after_max_ms)

    out: bytes | bytearray | memoryview = batch
    if recompress:
        out = reframe(header, encode_records(rows), codec.CODES[target])
        _check_size(BatchHeader.parse(out), config)
    if config.log_append_time:
        out = _with_max_timestamp(out, now_ms, TIMESTAMP_TYPE_FLAG)
    elif header.max_timestamp != max_timestamp or header.is_log_append_time:
        out = _with_max_timestamp(out, max_timestamp, 0)
    return out


def _check_size(header: BatchHeader, config: LogConfig) -> None:
    if header.size_in_bytes > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes {config.max_message_bytes}"
        )


def _check_timestamp(timestamp: int, now_ms: int, before_max_ms: int, after_max_ms: int) -> None:
    if timestamp < NO_TIMESTAMP:
        raise InvalidTimestampError(f"record timestamp {timestamp} is negative")
    if timestamp == NO_TIMESTAMP:
        return
    if now_ms - timestamp > before_max_ms:
        raise InvalidTimestampError(
            f"record timestamp {timestamp} is more than message.timestamp.before.max.ms "
            f"{before_max_ms} before the broker's time {now_ms}"
        )
    if timestamp - now_ms > after_max_ms:
        raise InvalidTimestampError(
            f"record timestamp {timestamp} is more than message.timestamp.after.max.ms "
            f"{after_max_ms} after the broker's time {now_ms}"
        )


def _with_max_timestamp(batch: bytes | bytearray | memoryview, timestamp: int, type_flag: int) -> bytearray:
    """Kafka's DefaultRecordBatch.setMaxTimestamp: the timestamp type and the max timestamp
    rewritten (the first timestamp kept), the CRC recomputed."""
    out = bytearray(batch)
    attributes = int.from_bytes(out[ATTRIBUTES_POS:ATTRIBUTES_POS + 2], "big", signed=True)
    attributes = (attributes & ~TIMESTAMP_TYPE_FLAG) | type_flag
    out[ATTRIBUTES_POS:ATTRIBUTES_POS + 2] = attributes.to_bytes(2, "big", signed=True)
    out[_MAX_TIMESTAMP_POS:_MAX_TIMESTAMP_POS + 8] = timestamp.to_bytes(8, "big", signed=True)
    out[_CRC_POS:_CRC_POS + 4] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return out


# -- conversions (for the reader of the other format only; the log keeps what was written) ------


def to_kraft(buf: bytes | bytearray | memoryview, pos: int = 0) -> bytes:
    """The v2 batch at `pos` as a kraft batch: the same header fields (offsets, epoch, producer,
    timestamps, attributes and codec), the records re-encoded as kraft's msgpack rows."""
    header = validate_framing(buf, pos)
    rows = [list(row) for row in _rows(buf, pos, header, MAX_DECOMPRESSED_BYTES)]
    return encode_kraft_batch(
        rows, base_offset=header.base_offset, last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp,
        attributes=header.attributes, partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )


def from_kraft(buf: bytes | bytearray | memoryview, pos: int = 0) -> bytes:
    """The kraft batch at `pos` as a v2 batch with the same header fields and codec (for a
    Kafka client reading a batch written over HTTP)."""
    header = validate_batch(buf, pos)
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    rows = [
        (r.offset - base_offset, r.timestamp - base_timestamp, r.key, r.value, r.headers)
        for r in decode_kraft_records(buf, pos)
    ]
    return reframe(replace(header, magic=MAGIC_V2), encode_records(rows), header.compression_code)

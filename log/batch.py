"""The record batch codec: kraft's wire and disk format, shared by clients and brokers (pure).

A batch is a 61-byte big-endian header modelled on Kafka's v2 header, then a payload: one msgpack
array of records, optionally compressed. Each record is
`[offset_delta, timestamp_delta, key, value, headers]`. The CRC-32C covers everything from
`attributes` to the end, so a broker stamps `base_offset` and `partition_leader_epoch` without
recomputing it. The magic byte sits where Kafka's does, with its own value: the log stores these
beside Kafka's RecordBatch v2 (magic 2, log/kafka_batch.py) as each producer sent them, and
log/records.py decodes either. See docs/internals.md §1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from collections import deque
from itertools import accumulate, count, islice, repeat
from operator import add
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import crc32c
import msgpack

from kraft.log import compression as codec
from kraft.log.errors import CorruptRecordError, InvalidRecordError

MAGIC = 0x4B  # "K": kraft's msgpack batch format
MAGIC_V2 = 2  # Kafka's RecordBatch v2 (log/kafka_batch.py)
STORED_MAGICS = (MAGIC, MAGIC_V2)  # what a log holds; any other magic is corrupt

# base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, record_count
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes batch_length does not count
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_LENGTH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_MAGIC_POS = 16
_CRC_POS = 17
ATTRIBUTES_POS = 21  # the CRC covers [ATTRIBUTES_POS, end)
_TIMESTAMPS = struct.Struct(">hiqq")  # attributes, last_offset_delta, base/max timestamp
_LENGTH_POS = 8
_EPOCH_POS = 12

COMPRESSION_CODES: dict[str, int] = codec.CODES  # Kafka's codes: log/compression.py
COMPRESSIONS: tuple[str, ...] = tuple(COMPRESSION_CODES)
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08  # set: LogAppendTime, clear: CreateTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
NO_TIMESTAMP = -1

# A decompressed payload larger than this is refused rather than allocated (decompression bombs).
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024

_packb = msgpack.Packer(use_bin_type=True).pack


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Reads the header at `pos` without checking it (see `validate_batch`)."""
        if len(buf) - pos < HEADER_SIZE:
            raise CorruptRecordError(
                f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left at position {pos}"
            )
        return cls(*_HEADER.unpack_from(buf, pos))

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression_code(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def compression(self) -> str:
        """The codec name; raises InvalidRecordError for a codec kraft does not support."""
        return codec.name(self.compression_code)

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        """A control batch (a transaction marker, `log/control.py`): never an application's record."""
        return bool(self.attributes & CONTROL_FLAG)


def decompressed_size(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, limit: int) -> int:
    """The size of the validated batch at `pos` with its records payload decompressed, counted a
    chunk at a time so that nothing past `limit` is ever allocated: counting stops once the size
    passes `limit` (the answer is then larger than it). Raises CorruptRecordError."""
    body = memoryview(buf)[pos + HEADER_SIZE : pos + header.size_in_bytes]
    return HEADER_SIZE + codec.decompressed_size(header.compression_code, body, limit - HEADER_SIZE)


def _array_header(count: int) -> bytes:
    """The msgpack array header of `count` elements, in the shortest form (as packb writes it)."""
    if count < 16:
        return bytes((0x90 | count,))
    if count < 0x10000:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def _frame(
    payload: bytes | bytearray | memoryview,
    array_header: bytes,
    record_count: int,
    last_offset_delta: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    magic: int = MAGIC,
) -> bytes:
    """Header + (compressed) `array_header + payload`, the CRC computed piecewise so the payload
    is copied once when uncompressed. `magic` 2 frames Kafka's v2 records (log/kafka_batch.py)."""
    code = attributes & COMPRESSION_MASK
    parts: tuple[Any, ...]
    if code == codec.NONE:
        parts = (array_header, payload) if array_header else (payload,)
    else:
        parts = (codec.compress(code, array_header + bytes(payload)),)
    header = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        header, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + sum(map(len, parts)),
        partition_leader_epoch, magic, 0, attributes, last_offset_delta, base_timestamp,
        max_timestamp, producer_id, producer_epoch, base_sequence, record_count,
    )
    crc = crc32c.crc32c(memoryview(header)[ATTRIBUTES_POS:])
    for part in parts:
        crc = crc32c.crc32c(part, crc)
    _CRC.pack_into(header, _CRC_POS, crc)
    return b"".join((header, *parts))


def new_row_packer(size_hint: int = 64 * 1024) -> msgpack.Packer:
    """A packer for building a batch row by row: `packer.pack((offset_delta, timestamp_delta,
    key, value, headers))` per record, then `frame_rows(packer.getbuffer(), count, ...)`. The
    client's hot path: nothing per record outlives the `pack` call."""
    return msgpack.Packer(use_bin_type=True, autoreset=False, buf_size=max(1024, size_hint))


# Bytes per row beyond its key and value (the msgpack array, deltas, headers), for batch sizing.
ROW_OVERHEAD = 16


def row_ends(sizes: Iterable[int]) -> list[int]:
    """`ends[i]`: the size of rows 0..i together, from each row's key and value bytes
    (ROW_OVERHEAD added to each): cut a batch with `bisect` over it instead of a loop per row."""
    return list(accumulate(map(add, sizes, repeat(ROW_OVERHEAD))))


def pack_rows(pack: Callable[[Any], Any], first_delta: int, timestamp_delta: int, values: Sequence[bytes | None],
              start: int, stop: int, keys: Sequence[bytes | None] | None = None,
              headers: Sequence[Any] | None = None) -> None:
    """Packs rows `start..stop` of the columns into a `new_row_packer`'s `pack`, offset deltas
    from `first_delta`, all with `timestamp_delta` (keys None / headers None: none on any row);
    no Python bytecode per row (`map` over `zip`)."""
    rows = zip(
        count(first_delta), repeat(timestamp_delta),
        repeat(None) if keys is None else islice(keys, start, stop),
        islice(values, start, stop),
        repeat(()) if headers is None else islice(headers, start, stop),
    )
    deque(map(pack, rows), maxlen=0)


def frame_rows(
    rows: bytes | bytearray | memoryview,
    record_count: int,
    *,
    base_timestamp: int,
    max_timestamp: int,
    compression: str = "none",
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A batch of `record_count` rows packed one after another (see `new_row_packer`), with
    offset deltas 0..record_count-1; the same bytes as `build_batch` for the same records."""
    if record_count <= 0:
        raise InvalidRecordError("a batch needs at least one record")
    if compression not in COMPRESSION_CODES:
        raise InvalidRecordError(f"unknown compression {compression!r}; use one of {COMPRESSIONS}")
    return _frame(
        rows, _array_header(record_count), record_count, record_count - 1, base_offset,
        base_timestamp, max_timestamp, COMPRESSION_CODES[compression] | (TRANSACTIONAL_FLAG if transactional else 0),
        -1, producer_id, producer_epoch, base_sequence,
    )


def encode_batch(
    rows: Sequence[Sequence[Any]],
    *,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """Assembles a batch from already-shaped record rows `[offset_delta, ts_delta, key, value,
    headers]`; `build_batch` is the usual entry point, the cleaner uses this to keep offsets."""
    return _frame(
        _packb(rows), b"", len(rows), last_offset_delta, base_offset, base_timestamp,
        max_timestamp, attributes, partition_leader_epoch, producer_id, producer_epoch,
        base_sequence,
    )


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
    """Builds one batch from `(key, value, headers, timestamp_ms)` tuples (headers: a sequence of
    `(str, bytes | None)` pairs, or None). The client hot path: one packb, one CRC.
    `transactional` sets the batch's transactional bit (a transactional producer's, KIP-98)."""
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    if compression not in COMPRESSION_CODES:
        raise InvalidRecordError(f"unknown compression {compression!r}; use one of {COMPRESSIONS}")
    base_ts = records[0][3]
    max_ts = max(r[3] for r in records)
    rows = [
        [i, ts - base_ts, key, value, headers or ()]
        for i, (key, value, headers, ts) in enumerate(records)
    ]
    return encode_batch(
        rows,
        base_offset=base_offset,
        last_offset_delta=len(rows) - 1,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=COMPRESSION_CODES[compression] | (TRANSACTIONAL_FLAG if transactional else 0),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of the covered range of the batch at `pos` of total size `size`."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0, magic: int = MAGIC) -> BatchHeader:
    """Parses and checks the framing (length, magic, CRC) of the batch at `pos`: a kraft batch,
    or with `magic=2` a Kafka v2 one (the same header).

    Raises CorruptRecordError; content rules (record counts, sizes) are `LogValidator`'s job."""
    return _validate(buf, pos, (magic,))


def validate_stored(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """`validate_batch` for either format a log stores (STORED_MAGICS)."""
    return _validate(buf, pos, STORED_MAGICS)


def _validate(buf: bytes | bytearray | memoryview, pos: int, magics: tuple[int, ...]) -> BatchHeader:
    header = BatchHeader.parse(buf, pos)
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {pos} has batch_length {header.batch_length}, "
            f"below the minimum {_MIN_BATCH_LENGTH}"
        )
    size = header.size_in_bytes
    if pos + size > len(buf):
        raise CorruptRecordError(
            f"batch at position {pos} claims {size} bytes but only {len(buf) - pos} remain"
        )
    if header.magic not in magics:
        raise CorruptRecordError(
            f"batch at position {pos} has magic {header.magic}, expected {' or '.join(map(str, magics))}"
        )
    crc = compute_crc(buf, pos, size)
    if crc != header.crc:
        raise CorruptRecordError(
            f"batch at position {pos} (base offset {header.base_offset}) fails its CRC: "
            f"stored {header.crc:#010x}, computed {crc:#010x}"
        )
    return header


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Yields `(position, header)` for each complete batch of concatenated batches.

    Stops at an incomplete trailing batch (fetch responses may cut the last one). The CRC is not
    checked here; a length that cannot be a batch raises CorruptRecordError."""
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = BatchHeader.parse(buf, pos)
        if header.batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch at position {pos} has batch_length {header.batch_length}"
            )
        size = header.size_in_bytes
        if pos + size > end:
            return
        yield pos, header
        pos += size


def stamp(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Writes base_offset and partition_leader_epoch in place; both sit outside the CRC."""
    _OFFSET.pack_into(buf, pos, base_offset)
    _EPOCH.pack_into(buf, pos + _EPOCH_POS, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Marks the batch at `pos` LogAppendTime with `timestamp` as its max timestamp and recomputes
    its CRC, as Kafka's broker does for topics with message.timestamp.type=LogAppendTime
    (DefaultRecordBatch.setMaxTimestamp: the base timestamp stays the producer's; readers take
    the max timestamp as every record's)."""
    attributes, last_offset_delta, base_timestamp, _ = _TIMESTAMPS.unpack_from(buf, pos + ATTRIBUTES_POS)
    _TIMESTAMPS.pack_into(
        buf, pos + ATTRIBUTES_POS, attributes | TIMESTAMP_TYPE_FLAG, last_offset_delta,
        base_timestamp, timestamp,
    )
    _CRC.pack_into(buf, pos + _CRC_POS, compute_crc(buf, pos, size))


def recompress(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, code: int) -> bytes:
    """The validated batch at `pos` (either format: the records payload is codec-independent)
    with its payload in codec `code`: the same header fields with the new codec in the
    attributes, a new length and CRC (a topic's compression.type)."""
    return reframe(header, decompress_payload(buf, pos, header), code)


def reframe(header: BatchHeader, payload: bytes | bytearray | memoryview, code: int) -> bytes:
    """A batch with `header`'s fields (magic included, length and CRC new) around the
    uncompressed records `payload`, compressed with codec `code`."""
    return _frame(
        payload, b"", header.record_count, header.last_offset_delta, header.base_offset,
        header.base_timestamp, header.max_timestamp, (header.attributes & ~COMPRESSION_MASK) | code,
        header.partition_leader_epoch, header.producer_id, header.producer_epoch,
        header.base_sequence, header.magic,
    )


class BatchColumns(NamedTuple):
    """A decoded batch, column-wise: the consumers' fast path (no per-record object is built).
    `offsets` is a `range` when the batch has no gaps (it was not compacted)."""

    header: BatchHeader
    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[tuple[tuple[str, bytes | None], ...]]


_BYTES_OR_NONE = frozenset({bytes, type(None)})
_INT = frozenset({int})
_TUPLE = frozenset({tuple})
_STR = frozenset({str})


def decompress_payload(
    buf: bytes | bytearray | memoryview, pos: int = 0, header: BatchHeader | None = None
) -> bytes | memoryview:
    """The records payload (one msgpack array) of the batch at `pos`, decompressed. Validates
    the batch first unless its already validated `header` is given. Raises CorruptRecordError."""
    if header is None:
        header = validate_batch(buf, pos)
    body = memoryview(buf)[pos + HEADER_SIZE : pos + header.size_in_bytes]
    return codec.decompress(header.compression_code, body, MAX_DECOMPRESSED_BYTES)


def _only(types: frozenset[type], column: tuple[Any, ...]) -> bool:
    return set(map(type, column)) <= types


def _check_headers(all_headers: tuple[Any, ...]) -> None:
    if not _only(_TUPLE, all_headers):
        raise CorruptRecordError("record headers are not an array")
    for headers in filter(None, all_headers):
        if (
            not _only(_TUPLE, headers)
            or set(map(len, headers)) != {2}
            or not _only(_STR, tuple(h[0] for h in headers))
            or not _only(_BYTES_OR_NONE, tuple(h[1] for h in headers))
        ):
            raise CorruptRecordError(f"malformed record headers {headers!r}")


def decode_columns(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchColumns:
    """Validates the batch at `pos` and decodes it column-wise with absolute offsets and
    timestamps. Every field's type is checked, at C speed (sets of types; counts for the common
    all-None keys and header-less records). Raises CorruptRecordError; decompression is bounded
    by MAX_DECOMPRESSED_BYTES."""
    header = validate_batch(buf, pos)
    payload = decompress_payload(buf, pos, header)
    try:
        rows = msgpack.unpackb(payload, raw=False, use_list=False)
    except Exception as e:  # msgpack raises several unrelated types for malformed input
        raise CorruptRecordError(f"batch payload is not valid msgpack: {e}") from e
    count = header.record_count
    if type(rows) is not tuple or len(rows) != count:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} declares {count} records "
            f"but its payload holds {len(rows) if type(rows) is tuple else 'no array'}"
        )
    if not rows:
        return BatchColumns(header, (), (), (), (), ())
    if not _only(_TUPLE, rows) or set(map(len, rows)) != {5}:
        raise CorruptRecordError(f"batch at offset {header.base_offset} has a malformed record")
    deltas, ts_deltas, keys, values, headers = zip(*rows)
    if not (
        _only(_INT, ts_deltas)
        and (keys.count(None) == count or _only(_BYTES_OR_NONE, keys))
        and _only(_BYTES_OR_NONE, values)
    ):
        raise CorruptRecordError(f"batch at offset {header.base_offset} has a malformed record")
    if headers.count(()) != count:
        _check_headers(headers)
    return columns_of(header, deltas, ts_deltas, keys, values, headers)


def columns_of(
    header: BatchHeader,
    deltas: Sequence[int],
    ts_deltas: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[tuple[tuple[str, bytes | None], ...]],
) -> BatchColumns:
    """The columns of a batch's records from their offset and timestamp deltas (either format:
    log/kafka_batch.py builds its columns here too); the other columns checked by the caller.
    Raises CorruptRecordError for an offset delta that is not an int."""
    count = len(deltas)
    base = header.base_offset
    offsets: Sequence[int]
    if deltas[0] == 0 and deltas[-1] == count - 1 and tuple(deltas) == tuple(range(count)):
        offsets = range(base, base + count)  # no gaps: the usual, uncompacted batch
    elif _only(_INT, deltas):
        offsets = tuple(map(add, repeat(base), deltas))
    else:
        raise CorruptRecordError(f"batch at offset {base} has a malformed offset delta")
    timestamps: Sequence[int]
    if header.is_log_append_time:
        timestamps = tuple(repeat(header.max_timestamp, count))
    else:
        timestamps = tuple(map(add, repeat(header.base_timestamp), ts_deltas))
    return BatchColumns(header, offsets, timestamps, keys, values, headers)


def decode_records(buf: bytes | bytearray | memoryview, pos: int = 0) -> list[Record]:
    """Validates the batch at `pos` and returns its records with absolute offsets/timestamps.

    Used by JSON routes, compaction and consumers only: the broker's hot path never decodes."""
    columns = decode_columns(buf, pos)
    return list(map(Record, *columns[1:]))

"""The batch codec: round trips, header fields, CRC coverage, framing errors."""

from __future__ import annotations

import struct

import crc32c
import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log.batch import (
    ATTRIBUTES_POS,
    COMPRESSIONS,
    HEADER_SIZE,
    MAGIC,
    BatchHeader,
    Record,
    build_batch,
    decode_columns,
    decode_records,
    decompress_payload,
    encode_batch,
    frame_rows,
    iter_batches,
    new_row_packer,
    set_log_append_time,
    stamp,
    validate_batch,
)
from kraft.log.errors import CorruptRecordError, InvalidRecordError
from log_testing import make_batch

optional_bytes = st.one_of(st.none(), st.binary(max_size=64))
headers = st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3)
records = st.lists(
    st.tuples(optional_bytes, optional_bytes, headers, st.integers(0, 2**41)),
    min_size=1,
    max_size=20,
)


def test_header_is_61_bytes_and_fields_round_trip() -> None:
    data = build_batch(
        [(b"a", b"1", None, 50), (b"b", b"2", [("h", b"x")], 40), (None, None, None, 70)],
        base_offset=9, producer_id=7, producer_epoch=2, base_sequence=11,
    )
    assert HEADER_SIZE == 61
    h = validate_batch(data)
    assert (h.base_offset, h.magic, h.record_count, h.last_offset_delta) == (9, MAGIC, 3, 2)
    assert (h.base_timestamp, h.max_timestamp) == (50, 70)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 11)
    assert h.size_in_bytes == len(data) and h.last_offset == 11 and h.next_offset == 12
    assert h.compression == "none" and not h.is_log_append_time


@settings(max_examples=60, deadline=None)
@given(records=records, compression=st.sampled_from(COMPRESSIONS), base=st.integers(0, 2**40))
def test_round_trip_every_compression(records, compression, base) -> None:
    data = build_batch(records, compression=compression, base_offset=base)
    assert validate_batch(data).compression == compression
    decoded = decode_records(data)
    assert decoded == [
        Record(base + i, ts, k, v, tuple((hk, hv) for hk, hv in (hs or ())))
        for i, (k, v, hs, ts) in enumerate(records)
    ]


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_crc_detects_any_single_byte_flip_in_covered_range(data) -> None:
    batch = bytearray(make_batch(data.draw(st.integers(1, 5)), compression=data.draw(st.sampled_from(COMPRESSIONS))))
    pos = data.draw(st.integers(ATTRIBUTES_POS, len(batch) - 1))
    batch[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError):
        validate_batch(batch)


def test_stamp_changes_offset_and_epoch_without_breaking_crc() -> None:
    batch = bytearray(make_batch(3))
    stamp(batch, 0, 1234, 7)
    h = validate_batch(batch)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 7)
    assert [r.offset for r in decode_records(batch)] == [1234, 1235, 1236]


def test_log_append_time_stamps_the_max_timestamp_and_crc() -> None:
    batch = bytearray(make_batch(2, ts=5))
    set_log_append_time(batch, 0, len(batch), 999)
    h = validate_batch(batch)
    assert h.is_log_append_time and (h.base_timestamp, h.max_timestamp) == (5, 999)
    assert [r.timestamp for r in decode_records(batch)] == [999, 999]


def test_iter_batches_stops_at_incomplete_trailing_batch() -> None:
    a, b = make_batch(2), make_batch(3)
    blob = a + b
    assert [p for p, _ in iter_batches(blob)] == [0, len(a)]
    assert [p for p, _ in iter_batches(blob[:-1])] == [0]
    assert list(iter_batches(blob[: HEADER_SIZE - 1])) == []


def test_framing_errors() -> None:
    batch = bytearray(make_batch(1))
    with pytest.raises(CorruptRecordError, match="remain"):
        validate_batch(batch[:-1])
    with pytest.raises(CorruptRecordError, match="needs 61 bytes"):
        validate_batch(batch[:10])
    bad_magic = bytearray(batch)
    bad_magic[16] = 2
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_batch(bad_magic)
    bad_length = bytearray(batch)
    struct.pack_into(">i", bad_length, 8, 3)
    with pytest.raises(CorruptRecordError, match="batch_length"):
        validate_batch(bad_length)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(bad_length))


def test_build_rejects_empty_and_unknown_compression() -> None:
    with pytest.raises(InvalidRecordError):
        build_batch([])
    with pytest.raises(InvalidRecordError, match="brotli"):
        build_batch([(None, b"x", None, 1)], compression="brotli")


def test_decode_rejects_payload_that_does_not_match_header() -> None:
    # A batch whose (CRC-valid) payload holds fewer records than the header declares.
    good = make_batch(2)
    h = BatchHeader.parse(good)
    lying = encode_batch([[0, 0, b"k", b"v", []]], base_offset=0, last_offset_delta=1,
                         base_timestamp=h.base_timestamp, max_timestamp=h.max_timestamp)
    forged = bytearray(lying)
    struct.pack_into(">i", forged, HEADER_SIZE - 4, 2)  # record_count := 2, then fix the CRC
    struct.pack_into(">I", forged, 17, crc32c.crc32c(bytes(forged[ATTRIBUTES_POS:])))
    with pytest.raises(CorruptRecordError, match="declares 2 records"):
        decode_records(forged)


@settings(max_examples=60, deadline=None)
@given(records=records, compression=st.sampled_from(COMPRESSIONS))
def test_rows_packed_one_by_one_frame_the_same_bytes_as_build_batch(records, compression) -> None:
    packer = new_row_packer(16)
    base_ts = records[0][3]
    for i, (k, v, hs, ts) in enumerate(records):
        packer.pack((i, ts - base_ts, k, v, tuple(tuple(h) for h in hs or ())))
    framed = frame_rows(packer.getbuffer(), len(records), base_timestamp=base_ts,
                        max_timestamp=max(r[3] for r in records), compression=compression)
    expected = build_batch(records, compression=compression)
    if compression in ("none", "lz4", "zstd"):  # gzip writes the time into its header
        assert framed == expected
    assert decode_records(framed) == decode_records(expected)


@settings(max_examples=60, deadline=None)
@given(records=records, compression=st.sampled_from(COMPRESSIONS), base=st.integers(0, 2**40))
def test_decode_columns_matches_decode_records(records, compression, base) -> None:
    data = b"junk" + build_batch(records, compression=compression, base_offset=base)
    columns = decode_columns(data, 4)
    assert columns.header == validate_batch(data, 4)
    assert list(zip(*columns[1:])) == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_records(data, 4)
    ]
    assert columns.offsets == range(base, base + len(records))
    rows = msgpack.unpackb(decompress_payload(data, 4))
    assert [row[3] for row in rows] == [r[1] for r in records]


def forge(rows: list) -> bytes:
    """A CRC-valid batch whose payload is `rows` as given (a broken producer's work)."""
    return encode_batch(rows, base_offset=5, last_offset_delta=max(0, len(rows) - 1),
                        base_timestamp=100, max_timestamp=100)


@pytest.mark.parametrize("rows", [
    [[0, 0, b"k", b"v"]],  # four fields
    [[0, 0, b"k", b"v", [], 1]],  # six fields
    [7],  # not an array
    [[0, 0, "key as str", b"v", []]],
    [[0, 0, None, 12, []]],
    [[0, 0.5, None, b"v", []]],
    [[0.5, 0, None, b"v", []]],
    [[0, 0, None, b"v", 3]],
    [[0, 0, None, b"v", [["h"]]]],
    [[0, 0, None, b"v", [[1, b"x"]]]],
    [[0, 0, None, b"v", [["h", "str value"]]]],
    [[0, 0, None, b"v", []], [1, 0, None, b"v", [["h", 5]]]],
])
def test_decoders_reject_mistyped_records(rows: list) -> None:
    data = forge(rows)
    for decode in (decode_columns, decode_records):
        with pytest.raises(CorruptRecordError):
            decode(data)


def test_columns_of_a_compacted_batch_and_of_log_append_time() -> None:
    data = bytearray(forge([[0, 0, b"a", b"1", []], [3, 2, b"b", None, [["h", None]]]]))
    columns = decode_columns(data)
    assert list(columns.offsets) == [5, 8] and list(columns.timestamps) == [100, 102]
    assert columns.headers == ((), (("h", None),)) and columns.values == (b"1", None)
    set_log_append_time(data, 0, len(data), 999)
    assert list(decode_columns(data).timestamps) == [999, 999]


def test_frame_rows_rejects_empty_and_unknown_compression() -> None:
    with pytest.raises(InvalidRecordError):
        frame_rows(b"", 0, base_timestamp=0, max_timestamp=0)
    with pytest.raises(InvalidRecordError, match="brotli"):
        frame_rows(b"\xc0", 1, base_timestamp=0, max_timestamp=0, compression="brotli")

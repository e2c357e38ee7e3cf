"""The batch codec: round trips, header fields, CRC coverage, framing errors."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.batch import (
    ATTRIBUTES_POS,
    COMPRESSIONS,
    HEADER_SIZE,
    MAGIC,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    encode_batch,
    iter_batches,
    set_log_append_time,
    stamp,
    validate_batch,
)
from log.errors import CorruptRecordError, InvalidRecordError
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


def test_log_append_time_rewrites_timestamps_and_crc() -> None:
    batch = bytearray(make_batch(2, ts=5))
    set_log_append_time(batch, 0, len(batch), 999)
    h = validate_batch(batch)
    assert h.is_log_append_time and h.max_timestamp == 999
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
    with pytest.raises(InvalidRecordError, match="snappy"):
        build_batch([(None, b"x", None, 1)], compression="snappy")


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

"""log/compression.py: the four codecs by Kafka's codes, Kafka's wire forms, bounded decompression."""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log import compression
from kraft.log.errors import CorruptRecordError, InvalidRecordError

CODES = sorted(compression.NAMES)
COMPRESSED = [c for c in CODES if c != compression.NONE]


def test_kafka_attribute_codes() -> None:
    assert compression.CODES == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@settings(max_examples=60, deadline=None)
@given(code=st.sampled_from(CODES), data=st.binary(max_size=100_000) | st.just(b"a" * 200_000))
def test_round_trip(code: int, data: bytes) -> None:
    packed = compression.compress(code, data)
    assert bytes(compression.decompress(code, packed, len(data))) == data


@pytest.mark.parametrize("code", COMPRESSED)
def test_output_one_byte_over_the_bound_is_refused(code: int) -> None:
    data = bytes(range(256)) * 40
    packed = compression.compress(code, data)
    assert bytes(compression.decompress(code, packed, len(data))) == data
    with pytest.raises(CorruptRecordError, match="more than"):
        compression.decompress(code, packed, len(data) - 1)


def test_zstd_frame_declaring_its_size_is_refused_before_allocating() -> None:
    # zstandard allocates a declared content size and ignores max_output_size for such frames:
    # a 1 GiB bomb of a few KiB would be allocated whole without the check
    bomb = zstandard.ZstdCompressor(write_content_size=True).compress(b"\0" * (1 << 20))
    assert zstandard.frame_content_size(bomb) == 1 << 20
    with pytest.raises(CorruptRecordError, match="more than 1000 bytes"):
        compression.decompress(compression.ZSTD, bomb, 1000)


def test_snappy_block_declaring_a_huge_length_is_refused_before_allocating() -> None:
    declared = b"\xff\xff\xff\xff\x0f"  # varint 2**32 - 1: the uncompressed length
    with pytest.raises(CorruptRecordError, match="more than"):
        compression.decompress(compression.SNAPPY, declared + b"\x00" * 16, 1 << 20)


@pytest.mark.parametrize("code", COMPRESSED)
def test_truncated_or_garbage_payload_is_corrupt(code: int) -> None:
    packed = compression.compress(code, b"kafka " * 1000)
    for bad in (packed[: len(packed) // 2], packed[:-1], b"\x00garbage\xff" * 3, b""):
        with pytest.raises(CorruptRecordError):
            compression.decompress(code, bad, 1 << 20)


def test_unknown_codes_are_invalid() -> None:
    for code in (5, 6, 7):
        with pytest.raises(InvalidRecordError, match="unsupported compression code"):
            compression.decompress(code, b"x", 10)
        with pytest.raises(InvalidRecordError):
            compression.compress(code, b"x")
        with pytest.raises(InvalidRecordError):
            compression.name(code)


def test_snappy_is_xerial_framed_and_raw_snappy_is_read_too() -> None:
    data = b"0123456789" * 10_000  # 100 kB: more than one 32 KiB xerial block
    packed = compression.compress(compression.SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    pos, blocks, out = 16, 0, b""
    while pos < len(packed):  # the blocks are length-prefixed raw snappy, as Java writes them
        (length,) = struct.unpack_from(">i", packed, pos)
        out += bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length]))
        pos += 4 + length
        blocks += 1
    assert out == data and blocks == 4
    raw = bytes(cramjam.snappy.compress_raw(data))  # what librdkafka may send
    assert bytes(compression.decompress(compression.SNAPPY, raw, len(data))) == data


def test_lz4_is_one_frame_with_kafkas_settings() -> None:
    packed = compression.compress(compression.LZ4, b"x" * 100_000)
    info = lz4.frame.get_frame_info(packed)
    assert info["block_size"] == 64 * 1024 and not info["block_linked"]
    assert info["content_size"] == 0  # not stored, as KafkaLZ4BlockOutputStream writes it
    with pytest.raises(CorruptRecordError, match="after the lz4 frame"):
        compression.decompress(compression.LZ4, packed + packed, 1 << 20)


def test_gzip_members_concatenated_are_read_as_one_stream() -> None:
    # GZIPInputStream reads every member; the bound covers them all together
    packed = gzip.compress(b"a" * 1000) + gzip.compress(b"b" * 1000)
    assert bytes(compression.decompress(compression.GZIP, packed, 2000)) == b"a" * 1000 + b"b" * 1000
    with pytest.raises(CorruptRecordError, match="more than"):
        compression.decompress(compression.GZIP, packed, 1999)


def test_none_returns_the_payload_itself() -> None:
    payload = memoryview(b"abc")
    assert compression.decompress(compression.NONE, payload, 0) is payload

"""Kafka's RecordBatch v2 codec (log/kafka_batch.py): round trips for every codec, conversions
both ways, every byte the CRC covers checked, Kafka's LogValidator rules, and the batches real
clients (kafka-python, confluent-kafka, aiokafka) wrote, committed as fixtures."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_capture import FIXTURE_MESSAGES
from kraft.log import kafka_batch as kb
from kraft.log.batch import (
    ATTRIBUTES_POS,
    COMPRESSIONS,
    CONTROL_FLAG,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    Record,
    build_batch,
    compute_crc,
    decode_records,
    decompress_payload,
    reframe,
    stamp,
    validate_batch,
)
from kraft.log.config import LogConfig
from kraft.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kafka_batches"
NOW = 1_800_000_000_000

optional_bytes = st.one_of(st.none(), st.binary(max_size=64))
headers = st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3)
records = st.lists(
    st.tuples(optional_bytes, optional_bytes, headers, st.integers(0, 2**41)), min_size=1, max_size=20,
)


def _plain(records: list[Record]) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(map(tuple, r.headers))) for r in records]


def _expected(rows: list[tuple], base: int = 0) -> list[tuple]:
    return [(base + i, ts, k, v, tuple(map(tuple, h or ()))) for i, (k, v, h, ts) in enumerate(rows)]


@settings(max_examples=80, deadline=None)
@given(rows=records, compression=st.sampled_from(COMPRESSIONS), base=st.integers(0, 2**40))
def test_round_trip_every_codec(rows, compression, base) -> None:
    data = kb.build_batch(rows, compression=compression, base_offset=base)
    header = kb.validate_framing(data)
    assert (header.magic, header.compression, header.record_count) == (2, compression, len(rows))
    assert (header.base_timestamp, header.max_timestamp) == (rows[0][3], max(r[3] for r in rows))
    assert _plain(kb.decode_records(data)) == _expected(rows, base)


@settings(max_examples=60, deadline=None)
@given(rows=records, compression=st.sampled_from(COMPRESSIONS))
def test_conversions_round_trip_both_ways(rows, compression) -> None:
    v2 = kb.build_batch(rows, compression=compression, base_offset=5, producer_id=3, producer_epoch=1,
                        base_sequence=9)
    kraft = kb.to_kraft(v2)
    assert _plain(decode_records(kraft)) == _plain(kb.decode_records(v2))
    back = kb.from_kraft(kraft)
    same = ("base_offset", "partition_leader_epoch", "attributes", "last_offset_delta", "base_timestamp",
            "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count")
    for a, b in ((kb.validate_framing(v2), validate_batch(kraft)), (validate_batch(kraft), kb.validate_framing(back))):
        assert [getattr(a, f) for f in same] == [getattr(b, f) for f in same]
    assert _plain(kb.decode_records(back)) == _plain(kb.decode_records(v2))
    if compression == "none":  # the encoding is canonical: the same bytes come back
        assert back == v2
    kraft_native = build_batch(rows, compression=compression)
    assert _plain(decode_records(kb.to_kraft(kb.from_kraft(kraft_native)))) == _plain(decode_records(kraft_native))


def test_conversion_keeps_offset_gaps_of_compacted_batches() -> None:
    recs = [Record(10, 100, b"a", b"1"), Record(13, 105, b"b", None, (("h", b"x"),))]
    v2 = kb.encode_batch(recs, base_offset=10, compression="zstd")
    assert kb.validate_framing(v2).last_offset_delta == 3
    assert kb.decode_records(v2) == recs
    assert decode_records(kb.to_kraft(v2)) == recs


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_byte_the_crc_covers_is_checked(compression: str) -> None:
    data = kb.build_batch([(b"k", b"v" * 40, [("h", b"x")], 1000), (None, b"w", None, 1001)],
                          compression=compression)
    unchecked = set(range(0, 8)) | set(range(12, 16))  # base offset and leader epoch: stamped later
    for pos in sorted(set(range(len(data))) - unchecked):
        for flip in (0x01, 0x80):
            bad = bytearray(data)
            bad[pos] ^= flip
            with pytest.raises((CorruptRecordError, InvalidRecordError)):
                kb.decode_records(bytes(bad))


def test_base_offset_and_leader_epoch_are_stamped_without_the_crc() -> None:
    data = bytearray(kb.build_batch([(None, b"v", None, 5)]))
    stamp(data, 0, 77, 4)
    header = kb.validate_framing(data)
    assert (header.base_offset, header.partition_leader_epoch) == (77, 4)
    assert kb.decode_records(data)[0].offset == 77


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # fewer records than declared
        kb.encode_records([(0, 0, b"k", b"v", ())]) + b"\x00",  # bytes after the records
        b"\x7e" + bytes(5),  # a record length past the end
        b"\xff" * 6,  # a varint longer than 5 bytes
        b"\x0a\x00\x00\x00\x10kv",  # a key longer than its record
        kb.encode_records([(0, 0, None, b"v", (("x", None),))]).replace(b"x", b"\xff"),  # not UTF-8
    ],
    ids=["short", "trailing", "length", "varint", "key", "header-key"],
)
def test_malformed_records_are_corrupt(payload: bytes) -> None:
    header = BatchHeader.parse(kb.build_batch([(b"k", b"v", None, 1)]))
    with pytest.raises(CorruptRecordError):
        kb.decode_records(reframe(replace(header, record_count=1), payload, 0))


# -- Kafka's LogValidator for magic 2 -----------------------------------------------------------


def _batch(n: int = 3, ts: int = NOW - 1000, **kwargs) -> bytes:
    return kb.build_batch([(b"k%d" % i, b"v%d" % i, None, ts + i) for i in range(n)], **kwargs)


def test_a_good_batch_is_stored_as_sent() -> None:
    data = _batch(compression="lz4")
    assert kb.validate_for_append(data, LogConfig(), NOW) is data


def _forge(data: bytes, **fields) -> bytes:
    header = kb.validate_framing(data)
    return reframe(replace(header, **fields), decompress_payload(data, 0, header), header.compression_code)


def _with_attributes(data: bytes, attributes: int) -> bytes:
    out = bytearray(data)
    out[ATTRIBUTES_POS:ATTRIBUTES_POS + 2] = attributes.to_bytes(2, "big")
    out[17:21] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return bytes(out)


@pytest.mark.parametrize(
    "fields,error,match",
    [
        ({"record_count": 0}, InvalidRecordError, "count"),
        ({"last_offset_delta": 5}, InvalidRecordError, "offset range"),
        ({"attributes": CONTROL_FLAG}, InvalidRecordError, "control"),
        ({"attributes": TRANSACTIONAL_FLAG}, InvalidRecordError, "transactional"),
        ({"producer_id": 7, "base_sequence": -1}, InvalidRecordError, "sequence"),
        ({"record_count": 4, "last_offset_delta": 3}, CorruptRecordError, "records"),
    ],
)
def test_header_rules(fields, error, match) -> None:
    with pytest.raises(error, match=match):
        kb.validate_for_append(_forge(_batch(), **fields), LogConfig(), NOW)


def test_offset_deltas_must_count_from_zero() -> None:
    gappy = kb.encode_batch([Record(0, NOW, None, b"a"), Record(2, NOW, None, b"b")], base_offset=0,
                            last_offset_delta=1)
    with pytest.raises(InvalidRecordError, match="offset delta 2, expected 1"):
        kb.validate_for_append(gappy, LogConfig(), NOW)


def test_size_codec_and_keys() -> None:
    with pytest.raises(RecordTooLargeError):
        kb.validate_for_append(_batch(50), LogConfig(max_message_bytes=200), NOW)
    with pytest.raises(InvalidRecordError, match="unsupported compression code 6"):
        kb.validate_for_append(_with_attributes(_batch(), 6), LogConfig(), NOW)
    keyless = kb.build_batch([(None, b"v", None, NOW)])
    with pytest.raises(InvalidRecordError, match="without a key"):
        kb.validate_for_append(keyless, LogConfig(cleanup_policy="compact"), NOW)
    with pytest.raises(CorruptRecordError):
        kb.validate_for_append(_batch() + b"\x00", LogConfig(), NOW)


def test_create_time_bounds() -> None:
    config = LogConfig()
    kb.validate_for_append(_batch(ts=NOW + 3_600_000 - 2), config, NOW)  # within after.max.ms
    with pytest.raises(InvalidTimestampError, match="after.max.ms"):
        kb.validate_for_append(_batch(ts=NOW + 3_600_000), config, NOW)
    kb.validate_for_append(_batch(ts=0), config, NOW)  # before.max.ms: unbounded by default
    with pytest.raises(InvalidTimestampError, match="before.max.ms"):
        kb.validate_for_append(_batch(ts=NOW - 10_000), config, NOW, timestamp_before_max_ms=5_000)
    with pytest.raises(InvalidTimestampError, match="negative"):
        kb.validate_for_append(_batch(ts=-5), config, NOW)
    kb.validate_for_append(kb.build_batch([(None, b"v", None, -1)]), config, NOW)  # no timestamp
    # LogAppendTime topics take any producer timestamp
    kb.validate_for_append(_batch(ts=NOW + 10**9), LogConfig(message_timestamp_type="LogAppendTime"), NOW)


def test_log_append_time_stamps_the_max_timestamp_and_the_crc() -> None:
    data = _batch(ts=500)
    out = kb.validate_for_append(data, LogConfig(message_timestamp_type="LogAppendTime"), NOW)
    header = kb.validate_framing(out)  # the CRC is recomputed
    assert header.is_log_append_time and header.attributes & TIMESTAMP_TYPE_FLAG
    assert (header.base_timestamp, header.max_timestamp) == (500, NOW)  # Kafka keeps the first
    assert [r.timestamp for r in kb.decode_records(out)] == [NOW] * 3


def test_a_wrong_max_timestamp_is_corrected() -> None:
    data = _forge(_batch(ts=NOW - 100), max_timestamp=NOW + 5)
    out = kb.validate_for_append(data, LogConfig(), NOW)
    assert kb.validate_framing(out).max_timestamp == NOW - 98


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_compression_type_recompresses(target: str) -> None:
    code = "none" if target == "uncompressed" else target
    for source in COMPRESSIONS:
        data = _batch(compression=source)
        out = kb.validate_for_append(data, LogConfig(compression_type=target), NOW)
        assert kb.validate_framing(out).compression == code
        assert kb.decode_records(out) == kb.decode_records(data)
        if source == code:
            assert out is data


# -- batches real clients wrote (tests/kafka_capture.py; regenerate: python tests/kafka_capture.py)


def _fixture_messages() -> list[tuple]:
    return [(i, ts, k, v, tuple(map(tuple, h))) for i, (k, v, h, ts) in enumerate(FIXTURE_MESSAGES)]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.bin")), ids=lambda p: p.stem)
def test_captured_client_batches(path: Path) -> None:
    data = path.read_bytes()
    client, _, compression = path.stem.rpartition("-")
    header = kb.validate_framing(data)
    assert header.size_in_bytes == len(data) and header.compression == compression
    assert kb.validate_for_append(data, LogConfig(), NOW) is data  # stored as the client sent it
    assert _plain(kb.decode_records(data)) == _fixture_messages()
    assert _plain(decode_records(kb.to_kraft(data))) == _fixture_messages()
    same = LogConfig(compression_type="uncompressed" if compression == "none" else compression)
    assert kb.validate_for_append(data, same, NOW) is data
    assert client in ("kafka-python", "confluent-kafka", "aiokafka")


def test_fixtures_cover_every_client_and_codec() -> None:
    assert {p.stem for p in FIXTURES.glob("*.bin")} == {
        f"{client}-{codec}" for client in ("kafka-python", "confluent-kafka", "aiokafka") for codec in COMPRESSIONS
    }


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.bin")), ids=lambda p: p.stem)
def test_captured_client_batches_reencode(path: Path) -> None:
    """Decoded and encoded again with the client's header fields and codec, a client's batch holds
    the same records section (the same bytes when uncompressed: Kafka's encoding is canonical)."""
    data = path.read_bytes()
    header = kb.validate_framing(data)
    again = kb.encode_batch(
        kb.decode_records(data), base_offset=header.base_offset, compression=header.compression,
        base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp, attributes=header.attributes,
        last_offset_delta=header.last_offset_delta, partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
    )
    assert bytes(decompress_payload(again, 0, kb.validate_framing(again))) == bytes(decompress_payload(data, 0, header))
    assert kb.decode_records(again) == kb.decode_records(data)
    if header.compression == "none":
        assert again == data


@settings(max_examples=300, deadline=None)
@given(fixture=st.sampled_from(sorted(FIXTURES.glob("*.bin"))), where=st.floats(0, 1, exclude_max=True),
       bit=st.integers(0, 7))
def test_a_flipped_byte_of_a_captured_batch_fails_the_crc(fixture: Path, where: float, bit: int) -> None:
    """Any bit flipped from the CRC field on (the CRC itself, the header fields it covers, the
    compressed or plain records) is a CRC failure, for every client's batch of every codec."""
    data = bytearray(fixture.read_bytes())
    pos = ATTRIBUTES_POS - 4 + int(where * (len(data) - ATTRIBUTES_POS + 4))
    data[pos] ^= 1 << bit
    with pytest.raises(CorruptRecordError, match="fails its CRC"):
        kb.validate_framing(bytes(data))

"""LogValidator: every rule rejects the whole request; stamping; follower offset order."""

from __future__ import annotations

import struct
import tracemalloc

import crc32c
import pytest

from kraft.log.batch import (
    ATTRIBUTES_POS,
    COMPRESSIONS,
    HEADER_SIZE,
    BatchHeader,
    build_batch,
    decode_records,
    encode_batch,
    stamp,
    validate_batch,
    validate_stored,
)
from kraft.log.config import LogConfig
from kraft.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from kraft.log.records import decode_records as decode_either
from kraft.log.validator import LogValidator
from log_testing import make_batch


def _with_attributes(batch: bytes, attributes: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">h", buf, ATTRIBUTES_POS, attributes)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[ATTRIBUTES_POS:])))
    return bytes(buf)


def test_stamps_consecutive_offsets_and_epoch() -> None:
    validator = LogValidator(LogConfig())
    blob = make_batch(3) + make_batch(2)
    stamped = validator.assign_offsets(validator.validate_for_leader(blob), 40, 6, now_ms=0)
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for _, h in stamped.batches] == [
        (40, 42, 6), (43, 44, 6),
    ]
    assert stamped.record_count == 5 and stamped.size_in_bytes == len(blob)


@pytest.mark.parametrize("v2", [False, True], ids=["kraft", "v2"])
def test_log_append_time_stamps_the_max_timestamp_and_keeps_the_first(v2: bool) -> None:
    """Kafka's LogValidator with LogAppendTime (DefaultRecordBatch.setMaxTimestamp): the
    timestamp-type bit and the max timestamp are the append time, the base timestamp stays the
    producer's; readers take the max timestamp as every record's (as Kafka's do)."""
    validator = LogValidator(LogConfig(message_timestamp_type="LogAppendTime"))
    now = 1_700_000_000_000
    stamped = validator.assign_offsets(validator.validate_for_leader(make_batch(2, ts=5, v2=v2), now_ms=now),
                                       0, 0, now_ms=now)
    pos, header = stamped.batches[0]
    assert stamped.max_timestamp == now and header.is_log_append_time
    assert (header.base_timestamp, header.max_timestamp) == (5, now)
    assert BatchHeader.parse(stamped.buffer, pos) == header  # what is stored
    validate_stored(stamped.buffer, pos)  # the CRC covers the change
    assert [r.timestamp for r in decode_either(stamped.buffer, pos)] == [now, now]


@pytest.mark.parametrize(
    "blob,error",
    [
        (b"", InvalidRecordError),
        (make_batch(1) + b"\x00" * 70, CorruptRecordError),  # trailing garbage
        (make_batch(1) + make_batch(1)[:-2], CorruptRecordError),  # cut batch
        (make_batch(1, size=2000), RecordTooLargeError),
        (encode_batch([[0, 0, b"k", b"v", []]], base_offset=0, last_offset_delta=3,
                      base_timestamp=0, max_timestamp=0), InvalidRecordError),
        (encode_batch([], base_offset=0, last_offset_delta=-1, base_timestamp=0,
                      max_timestamp=0), InvalidRecordError),
        (_with_attributes(make_batch(1), 5), InvalidRecordError),  # no codec has code 5
        (_with_attributes(make_batch(1), 0x10), InvalidRecordError),  # transactional
        (make_batch(1, ts=-5), InvalidTimestampError),
    ],
)
def test_bad_requests_are_rejected_whole(blob: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        LogValidator(LogConfig(max_message_bytes=1000)).validate_for_leader(make_batch(1) + blob if blob else blob)


def test_compacted_topic_needs_keys() -> None:
    validator = LogValidator(LogConfig(cleanup_policy="compact"))
    validator.validate_for_leader(make_batch(2, key=b"a"))
    with pytest.raises(InvalidRecordError, match="key"):
        validator.validate_for_leader(make_batch(2, key=None))


def test_follower_keeps_offsets_and_checks_order() -> None:
    validator = LogValidator(LogConfig())
    a, b = bytearray(make_batch(2)), bytearray(make_batch(2))
    stamp(a, 0, 10, 3)
    stamp(b, 0, 15, 4)  # a gap, as after compaction: allowed
    validated = validator.validate_for_follower(bytes(a + b), log_end_offset=10)
    assert [h.base_offset for _, h in validated.batches] == [10, 15]
    with pytest.raises(InvalidRecordError):
        validator.validate_for_follower(bytes(a + b), log_end_offset=11)
    with pytest.raises(InvalidRecordError):
        validator.validate_for_follower(bytes(b + a), log_end_offset=0)
    compacted = encode_batch([[0, 0, b"k", b"v", []], [3, 0, b"j", b"w", []]], base_offset=20,
                             last_offset_delta=4, base_timestamp=0, max_timestamp=0)
    assert BatchHeader.parse(validator.validate_for_follower(compacted, 20).buffer).last_offset == 24


@pytest.mark.parametrize("compression", ["zstd", "lz4", "gzip"])
def test_a_compression_bomb_is_refused_without_being_inflated(compression: str) -> None:
    """Issue 21: a 3 KB zstd batch of 100 MB of zeros passed max.message.bytes on its compressed
    size; every JSON read of it then allocated a gigabyte. The check counts the decompressed size
    a chunk at a time and stops at the bound, so it allocates about the bound, not the bomb."""
    bomb = build_batch([(None, b"\0" * (100 << 20), (), 0)], compression=compression)
    assert len(bomb) < 1 << 20
    validator = LogValidator(LogConfig())  # max.message.bytes 1048588
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError, match="decompressed"):
            validator.validate_for_leader(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"the check allocated {peak} bytes"


def test_a_compressed_batch_that_fits_decompressed_is_accepted() -> None:
    config = LogConfig(max_message_bytes=100_000)
    fits = build_batch([(None, b"x" * 99_000, (), 0)], compression="zstd")
    assert LogValidator(config).validate_for_leader(fits).record_count == 1
    over = build_batch([(None, b"x" * 100_000, (), 0)], compression="zstd")
    with pytest.raises(RecordTooLargeError):
        LogValidator(config).validate_for_leader(over)
    # the leader checked it; a follower keeps what the leader appended
    assert LogValidator(config).validate_for_follower(over, 0).record_count == 1


def test_an_uncompressed_batch_is_not_decoded() -> None:
    """Only the header's size counts: a payload that is not msgpack at all still passes (the hot
    path never decodes records; readers find CORRUPT_MESSAGE)."""
    buf = bytearray(make_batch(1))
    buf[HEADER_SIZE] = 0xC1  # a byte msgpack never uses
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[ATTRIBUTES_POS:])))
    assert LogValidator(LogConfig()).validate_for_leader(bytes(buf)).record_count == 1


@pytest.mark.parametrize("target", ["gzip", "snappy", "lz4", "zstd", "uncompressed"])
def test_compression_type_recompresses_other_codecs_and_keeps_its_own(target: str) -> None:
    # Kafka's LogValidator: a topic codec other than the batch's recompresses it at append
    code = "none" if target == "uncompressed" else target
    batches = [make_batch(3, compression=c) for c in COMPRESSIONS]
    validator = LogValidator(LogConfig(compression_type=target))
    validated = validator.validate_for_leader(b"".join(batches))
    assert [h.compression for _, h in validated.batches] == [code] * len(batches)
    for (pos, header), original in zip(validated.batches, batches):
        assert validate_batch(validated.buffer, pos) == header  # length and CRC are new and right
        if BatchHeader.parse(original).compression == code:
            assert validated.buffer[pos:pos + header.size_in_bytes] == original  # kept as sent
        assert decode_records(validated.buffer, pos) == decode_records(original)
        old = BatchHeader.parse(original)
        assert (header.record_count, header.base_timestamp, header.max_timestamp) == (
            old.record_count, old.base_timestamp, old.max_timestamp)
    stamped = validator.assign_offsets(validated, 10, 2, now_ms=0)
    assert [h.base_offset for _, h in stamped.batches] == [10 + 3 * i for i in range(len(batches))]


def test_compression_type_producer_keeps_every_batch_byte_for_byte() -> None:
    blob = b"".join(make_batch(2, compression=c) for c in COMPRESSIONS)
    assert LogValidator(LogConfig()).validate_for_leader(blob).buffer == blob


def test_a_batch_recompressed_past_max_message_bytes_is_too_large() -> None:
    batch = make_batch(50, size=100, compression="zstd")  # compresses well, stored uncompressed
    assert len(batch) < 1000
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        LogValidator(LogConfig(max_message_bytes=1000, compression_type="uncompressed")).validate_for_leader(batch)

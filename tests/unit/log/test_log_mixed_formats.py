"""A log holds kraft's batches and Kafka's v2 ones side by side, each as its writer sent it: the
validator applies Kafka's LogValidator to a producer's v2 batch (stored byte for byte when nothing
needs changing), one decoder reads either (`log/records.py`), any other magic is corrupt."""

from __future__ import annotations

from contextlib import suppress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.api.client.fetcher import records_from_batches
from kraft.log import kafka_batch
from kraft.log.batch import MAGIC, BatchHeader, Record, build_batch, iter_batches
from kraft.log.config import LogConfig
from kraft.log.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, LogError
from kraft.log.records import decode_columns, decode_records
from kraft.log.validator import LogValidator
from log_testing import all_records, make_batch

NOW = 1_700_000_000_000


def test_a_producers_v2_batch_is_stored_byte_for_byte(open_log) -> None:
    log = open_log()
    v2 = make_batch(3, ts=NOW, v2=True)
    kraft = make_batch(2, ts=NOW)
    log.append_as_leader(v2, 0, NOW)
    log.append_as_leader(kraft, 0, NOW)
    stored = log.read(0, 10**6).records
    [(p1, h1), (p2, h2)] = list(iter_batches(stored))
    assert (h1.magic, h2.magic) == (2, MAGIC)
    # the same bytes but the offsets and leader epoch the leader stamps outside the CRC
    assert stored[p1 + 16:p1 + h1.size_in_bytes] == v2[16:]
    assert stored[p2 + 16:p2 + h2.size_in_bytes] == kraft[16:]
    assert [r.offset for r in all_records(stored)] == [0, 1, 2, 3, 4]


def test_kafkas_rules_apply_to_a_v2_batch_in_a_mixed_request() -> None:
    validator = LogValidator(LogConfig())
    late = kafka_batch.build_batch([(b"k", b"v", None, NOW + 3_600_001)])
    with pytest.raises(InvalidTimestampError, match="after.max.ms"):
        validator.validate_for_leader(make_batch(1, ts=NOW) + late, NOW)
    gappy = kafka_batch.encode_batch([Record(0, NOW, b"k", b"a"), Record(2, NOW, b"k", b"b")], base_offset=0,
                                     last_offset_delta=1)
    with pytest.raises(InvalidRecordError, match="offset delta"):
        validator.validate_for_leader(gappy, NOW)
    keyless = kafka_batch.build_batch([(None, b"v", None, NOW)])
    with pytest.raises(InvalidRecordError, match="without a key"):
        LogValidator(LogConfig(cleanup_policy="compact")).validate_for_leader(keyless, NOW)


def test_a_v2_batch_the_validator_corrects_replaces_the_sent_one() -> None:
    """A wrong max timestamp (CreateTime) is corrected and the topic's compression.type applied,
    as Kafka's LogValidator does; the kraft batch beside it is kept as it is."""
    sent = kafka_batch.encode_batch([Record(0, NOW, b"k", b"a"), Record(1, NOW + 5, b"k", b"b")],
                                    base_offset=0, max_timestamp=NOW)
    kraft = make_batch(1, ts=NOW)
    validated = LogValidator(LogConfig(compression_type="zstd")).validate_for_leader(kraft + sent, NOW)
    [(_, first), (pos, second)] = validated.batches
    assert first.magic == MAGIC and second.magic == 2
    assert (second.max_timestamp, second.compression) == (NOW + 5, "zstd")
    assert validated.max_timestamp == NOW + 5
    assert [r.timestamp for r in decode_records(validated.buffer, pos)] == [NOW, NOW + 5]
    assert BatchHeader.parse(validated.buffer, pos) == second


def test_a_batch_of_any_other_magic_is_corrupt() -> None:
    for data in (make_batch(1), make_batch(1, v2=True)):
        bad = bytearray(data)
        bad[16] = 1
        with pytest.raises(CorruptRecordError, match="magic 1, expected 75 or 2"):
            decode_records(bytes(bad))
        with pytest.raises(CorruptRecordError, match="magic 1"):
            LogValidator(LogConfig()).validate_for_leader(bad, NOW)


_records = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.one_of(st.none(), st.binary(max_size=20)),
              st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
              st.integers(0, 10**12)),
    min_size=1, max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.tuples(_records, st.booleans(), st.sampled_from(["none", "gzip", "zstd"])),
                        min_size=1, max_size=6))
def test_either_format_decodes_to_the_same_records(batches) -> None:
    """The same records written as kraft's batch or as Kafka's decode alike, by records and by
    columns, and a mixed fetch answer reads in order through the Python client's decoder."""
    data = bytearray()
    expected: list[tuple] = []
    offset = 0
    for rows, v2, compression in batches:
        build = kafka_batch.build_batch if v2 else build_batch
        data += build([(k, v, tuple(h), ts) for k, v, h, ts in rows], compression=compression, base_offset=offset)
        expected += [(offset + i, ts, k, v, tuple(h)) for i, (k, v, h, ts) in enumerate(rows)]
        offset += len(rows)
    data = bytes(data)
    decoded = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in all_records(data)]
    assert decoded == expected
    for pos, _ in iter_batches(data):
        columns = decode_columns(data, pos)
        assert list(map(Record, *columns[1:])) == decode_records(data, pos)
    records, next_offset = records_from_batches(("t", 0), data, 0)
    assert [(r.offset, r.key, r.value) for r in records] == [(o, k, v) for o, _, k, v, _ in expected]
    assert next_offset == offset


@settings(max_examples=300, deadline=None)
@given(rows=_records, where=st.integers(0, 10**6), value=st.integers(0, 255), count_delta=st.integers(-1, 1))
def test_a_damaged_v2_records_section_under_a_valid_crc_is_corrupt_never_a_crash(rows, where, value, count_delta) -> None:
    """The v2 parser reads one-byte varints inline: a records section with any byte changed (its
    CRC made valid again, as a buggy producer would send it) decodes or is CORRUPT_MESSAGE."""
    from dataclasses import replace

    from kraft.log.batch import HEADER_SIZE, reframe

    data = kafka_batch.build_batch([(k, v, tuple(h), ts) for k, v, h, ts in rows])
    header = kafka_batch.validate_framing(data)
    payload = bytearray(data[HEADER_SIZE:])
    payload[where % len(payload)] = value
    count = max(0, header.record_count + count_delta)
    damaged = reframe(replace(header, record_count=count), payload, 0)
    try:
        decode_records(damaged)
    except CorruptRecordError:
        pass
    with pytest.raises(LogError) if count_delta else suppress(LogError):  # a wrong count never passes
        LogValidator(LogConfig()).validate_for_leader(damaged, NOW)



@settings(max_examples=200, deadline=None)
@given(timestamps=st.lists(st.sampled_from([-3, -1, 0, 50, 900, 1000, 1100, 2500]), min_size=1, max_size=6),
       before=st.sampled_from([100, 10**6]), after=st.sampled_from([50, 10**6]))
def test_timestamp_bounds_refuse_exactly_what_a_record_by_record_check_refuses(timestamps, before, after) -> None:
    """validate_for_append checks CreateTime column-wise (the earliest and the latest record):
    the same verdict as checking every record, NO_TIMESTAMP (-1) exempt, below it refused."""
    batch = kafka_batch.encode_batch([Record(i, ts, b"k", b"v") for i, ts in enumerate(timestamps)], base_offset=0)
    now = 1000
    refused = any(ts < -1 or (ts != -1 and (now - ts > before or ts - now > after)) for ts in timestamps)
    try:
        kafka_batch.validate_for_append(batch, LogConfig(), now, timestamp_before_max_ms=before,
                                        timestamp_after_max_ms=after)
    except InvalidTimestampError:
        assert refused
    else:
        assert not refused

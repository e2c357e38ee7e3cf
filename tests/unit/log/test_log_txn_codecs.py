"""The pure codecs of transactions: control records in both batch formats (Kafka's key/value
bytes), the 34-byte `.txnindex` entry and its collect rule, and what a reader sees of fetched
batches by isolation level (`log/isolation.py`)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log import kafka_batch
from kraft.log.batch import MAGIC, BatchHeader, build_batch, decode_records
from kraft.log.control import ABORT, COMMIT, build_marker_batch, marker_key, marker_value, parse_marker, read_marker
from kraft.log.errors import CorruptRecordError
from kraft.log.isolation import readable_batches
from kraft.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, collect, decode_entries
from transactions_support import stamped

INT16 = st.integers(0, 2**15 - 1)
INT32 = st.integers(0, 2**31 - 1)
INT64 = st.integers(0, 2**63 - 1)


@settings(max_examples=50, deadline=None)
@given(pid=INT64, epoch=INT16, coordinator_epoch=INT32, commit=st.booleans(), offset=INT32,
       magic=st.sampled_from([MAGIC, kafka_batch.MAGIC_V2]))
def test_a_marker_round_trips_in_both_formats_with_kafkas_bytes(pid, epoch, coordinator_epoch, commit, offset, magic) -> None:
    batch = build_marker_batch(producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
                               commit=commit, timestamp=5, base_offset=offset, magic=magic)
    header = BatchHeader.parse(batch)
    assert header.is_control and header.is_transactional and header.magic == magic
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (pid, epoch, -1)
    marker = read_marker(batch)
    assert (marker.control_type, marker.coordinator_epoch) == (COMMIT if commit else ABORT, coordinator_epoch)
    decode = kafka_batch.decode_records if magic == kafka_batch.MAGIC_V2 else decode_records
    [record] = decode(batch)
    # Kafka's ControlRecordType key and EndTransactionMarker value, byte for byte
    assert record.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert record.value == struct.pack(">hi", 0, coordinator_epoch)


def test_converting_a_marker_keeps_it() -> None:
    kraft = build_marker_batch(producer_id=3, producer_epoch=1, coordinator_epoch=9, commit=False, timestamp=1)
    v2 = kafka_batch.from_kraft(kraft)
    assert read_marker(v2) == read_marker(kraft) == read_marker(kafka_batch.to_kraft(v2))


@pytest.mark.parametrize("key,value,match", [
    (b"\x00", marker_value(1), "key of 1 bytes"),
    (None, marker_value(1), "key of 0 bytes"),
    (marker_key(ABORT), b"\x00\x00\x00", "marker of 3 bytes"),
    (b"\xff\xff\x00\x00", marker_value(1), "key version -1"),
    (marker_key(COMMIT), b"\xff\xff\x00\x00\x00\x01", "marker version -1"),
])
def test_malformed_markers_are_corrupt(key, value, match) -> None:
    with pytest.raises(CorruptRecordError, match=match):
        parse_marker(key, value)


def test_other_control_types_end_no_transaction() -> None:
    assert parse_marker(struct.pack(">hh", 0, 2), None) is None
    assert parse_marker(struct.pack(">hh", 1, COMMIT) + b"more", struct.pack(">hi", 3, 7) + b"x").coordinator_epoch == 7


def test_a_data_batch_holds_no_marker() -> None:
    with pytest.raises(CorruptRecordError, match="not a control batch"):
        read_marker(build_batch([(None, b"v", None, 1)]))


ABORTED = st.builds(AbortedTxn, INT64, INT64, INT64, INT64)


@given(entries=st.lists(ABORTED, max_size=20), torn=st.integers(0, ENTRY_SIZE - 1))
def test_index_entries_round_trip_and_a_torn_tail_is_counted(entries, torn) -> None:
    data = b"".join(e.encode() for e in entries)
    assert len(data) == ENTRY_SIZE * len(entries)
    extra = b"\x00" * torn
    assert decode_entries(data + extra) == (entries, torn)


def test_an_unknown_entry_version_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="version 1"):
        decode_entries(b"\x00\x01" + bytes(ENTRY_SIZE - 2))


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20), st.integers(0, 30)), max_size=12),
       st.integers(0, 80), st.integers(1, 40))
def test_collect_returns_exactly_the_overlapping_entries_until_one_is_stable_past_the_range(raw, fetch, span) -> None:
    """Kafka's collectAbortedTxns: an entry overlaps [fetch, upper) when its marker is at or past
    the fetch offset and it starts below the upper bound; the search completes at the first
    entry whose last stable offset reaches the upper bound."""
    entries, last = [], -1
    for first, length, lso_gap in raw:
        last = max(last + 1, first + length)
        entries.append(AbortedTxn(1, first, last, last + 1 + lso_gap))
    upper = fetch + span
    found, complete = collect(entries, fetch, upper)
    stop = next((i for i, e in enumerate(entries) if e.last_stable_offset >= upper), len(entries) - 1)
    assert complete == any(e.last_stable_offset >= upper for e in entries)
    assert found == [e for e in entries[:stop + 1] if e.last_offset >= fetch and e.first_offset < upper]


def test_the_index_file_is_created_by_its_first_entry_and_repaired(tmp_path) -> None:
    path = tmp_path / "00000000000000000010.txnindex"
    index = TransactionIndex(path, 10)
    index.truncate_to(0)
    index.flush()
    assert not path.exists()  # no entry, no file (Kafka's lazy TransactionIndex)
    entries = [AbortedTxn(1, 10, 12, 13), AbortedTxn(2, 11, 15, 16), AbortedTxn(3, 16, 20, 21)]
    for entry in entries:
        index.append(entry)
    with pytest.raises(ValueError, match="not above"):
        index.append(AbortedTxn(4, 19, 20, 21))
    index.close()
    path.write_bytes(path.read_bytes() + b"\x00\x00\x00")  # a torn append
    reloaded = TransactionIndex(path, 10)
    assert reloaded.entries == tuple(entries)
    with pytest.raises(CorruptRecordError, match="multiple of 34"):
        reloaded.sanity_check(21)
    assert reloaded.repair(16)  # the log now ends at 16: the entry of the marker at 20 goes
    assert reloaded.entries == tuple(entries[:2]) and path.stat().st_size == 2 * ENTRY_SIZE
    reloaded.sanity_check(16)
    with pytest.raises(CorruptRecordError, match="outside"):
        reloaded.sanity_check(15)
    reloaded.close()
    path.write_bytes(b"\x00\x07" + bytes(ENTRY_SIZE - 2))
    garbage = TransactionIndex(path, 10)
    assert not garbage.repair(100) and garbage.entries == () and path.stat().st_size == 0
    garbage.close()


def _txn(pid: int, seq: int, value: bytes, transactional: bool = True) -> bytes:
    return build_batch([(None, value, None, 1)], producer_id=pid, producer_epoch=0, base_sequence=seq,
                       transactional=transactional)


def _marker(pid: int, commit: bool) -> bytes:
    return build_marker_batch(producer_id=pid, producer_epoch=0, coordinator_epoch=0, commit=commit, timestamp=1)


def _values(data: bytes, aborted) -> list[bytes]:
    return [r.value for pos, _, visible in readable_batches(data, aborted) if visible
            for r in decode_records(data, pos)]


def test_readers_never_see_control_records_and_read_committed_drops_aborted_batches() -> None:
    # offsets: 0 plain, 1 p1 (aborted), 2 p2 (committed), 3 p1 abort, 4 p1 again (committed), 5 p2 commit,
    # 6 p1 commit
    data = stamped([build_batch([(None, b"plain", None, 1)]), _txn(1, 0, b"a1"), _txn(2, 0, b"b1"),
                   _marker(1, False), _txn(1, 1, b"a2"), _marker(2, True), _marker(1, True)])
    assert _values(data, None) == [b"plain", b"a1", b"b1", b"a2"]  # read_uncommitted: markers skipped
    assert _values(data, [(1, 1)]) == [b"plain", b"b1", b"a2"]  # the ABORT marker ends p1's abort
    assert [v for _, _, v in readable_batches(data, [(1, 1)])] == [True, False, True, False, True, False, False]

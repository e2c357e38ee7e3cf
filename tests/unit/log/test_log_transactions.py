"""Transactions in the storage engine: the producer state's transactional rules (KIP-98, KIP-890's
verification), the first unstable offset, and through PartitionLog: markers, the last stable
offset, read_committed reads and their aborted transactions, followers, reopening, retention and
compaction."""

from __future__ import annotations

import errno
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log import fault_injection
from kraft.log.batch import MAGIC, TRANSACTIONAL_FLAG, BatchHeader, build_batch, decode_records, iter_batches
from kraft.log.control import ABORT, COMMIT, EndTransactionMarker
from kraft.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from kraft.log.producer_state import ProducerStateManager
from kraft.log.txn_index import AbortedTxn
from log_testing import make_batch
from txn_testing import TxnWorkload, read_all, transactional_batch, visible_values


def header(pid: int, seq: int, offset: int, count: int = 1, epoch: int = 0, transactional: bool = True,
           control: bool = False, ts: int = 0) -> BatchHeader:
    return BatchHeader(
        base_offset=offset, batch_length=49, partition_leader_epoch=0, magic=MAGIC, crc=0,
        attributes=(TRANSACTIONAL_FLAG if transactional or control else 0) | (0x20 if control else 0),
        last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts, producer_id=pid,
        producer_epoch=epoch, base_sequence=-1 if control else seq, record_count=count,
    )


def marker(pid: int, offset: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0):
    return header(pid, -1, offset, epoch=epoch, control=True), EndTransactionMarker(COMMIT if commit else ABORT, coordinator_epoch)


def test_a_transactional_batch_needs_the_coordinators_verification() -> None:
    """KIP-890: a partition the coordinator did not add to the transaction refuses its first
    transactional batch (INVALID_TXN_STATE); the verification is used up by the transaction and
    cleared by its marker, so a late write after the marker cannot start a hanging one."""
    state = ProducerStateManager()
    with pytest.raises(InvalidTxnStateError, match="AddPartitionsToTxn"):
        state.check(header(7, 0, 0))
    state.verify_transaction(7, 1)  # another epoch's verification does not count
    with pytest.raises(InvalidTxnStateError):
        state.check(header(7, 0, 0))
    state.verify_transaction(7, 0)
    state.check_batches([header(7, 0, 0), header(7, 1, 1)])  # the second continues the first
    state.update(header(7, 0, 0))
    state.update(header(7, 1, 1))  # an open transaction needs no verification
    state.check(header(7, 2, 2))
    state.update(*marker(7, 2, commit=True))
    with pytest.raises(InvalidTxnStateError):
        state.check(header(7, 2, 3))
    state.verify_transaction(7, 0)
    state.update(*marker(7, 3, commit=False))  # a marker clears an unused verification too
    with pytest.raises(InvalidTxnStateError):
        state.check(header(7, 2, 4))


def test_the_oldest_open_transaction_is_aged_by_its_producers_last_batch() -> None:
    """KIP-664's late-transaction check ages the transaction that started first, by its
    producer's last write (Kafka's oldestTxnLastTimestamp)."""
    state = ProducerStateManager()
    assert state.oldest_transaction_last_timestamp() is None
    for pid in (7, 9):
        state.verify_transaction(pid, 0)
    state.update(header(7, 0, 0, ts=1_000))
    state.update(header(9, 0, 1, ts=2_000))
    state.update(header(7, 1, 2, ts=3_000))
    assert state.oldest_transaction_last_timestamp() == 3_000
    state.update(*marker(7, 3, commit=False))
    assert state.oldest_transaction_last_timestamp() == 2_000
    state.update(*marker(9, 4, commit=True))
    assert state.oldest_transaction_last_timestamp() is None


def test_a_plain_batch_of_a_producer_in_a_transaction_is_refused() -> None:
    state = ProducerStateManager()
    state.verify_transaction(7, 0)
    state.update(header(7, 0, 0))
    with pytest.raises(InvalidTxnStateError, match="expected a transactional write"):
        state.check(header(7, 1, 1, transactional=False))
    state.verify_transaction(9, 0)
    with pytest.raises(InvalidTxnStateError):  # in one request too
        state.check_batches([header(9, 0, 0), header(9, 1, 1, transactional=False)])


def test_markers_of_an_older_producer_or_coordinator_epoch_are_fenced() -> None:
    state = ProducerStateManager()
    state.verify_transaction(7, 2)
    state.update(header(7, 0, 0, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        state.check_marker(7, 1, 0)
    state.update(*marker(7, 1, commit=True, epoch=2, coordinator_epoch=5))
    with pytest.raises(TransactionCoordinatorFencedError):
        state.check_marker(7, 2, 4)
    state.check_marker(7, 3, 5)  # a bumped producer epoch (the coordinator fenced a zombie)
    state.check_marker(8, 0, 0)  # a producer with nothing here: written, completes nothing
    with pytest.raises(InvalidRecordError):
        state.check_marker(-1, 0, 0)


def test_the_first_unstable_offset_waits_for_the_marker_to_be_below_the_high_watermark() -> None:
    state = ProducerStateManager()
    for pid in (1, 2):
        state.verify_transaction(pid, 0)
    state.update(header(1, 0, 10))
    state.update(header(2, 0, 11))
    assert state.first_unstable_offset() == 10
    completed = state.update(*marker(1, 12, commit=False))
    # Kafka's lastStableOffset(completedTxn): the next open transaction of another producer
    assert completed == __import__("kraft.log.producer_state", fromlist=["x"]).CompletedTxn(1, 10, 12, True, 11)
    assert state.first_unstable_offset() == 10  # its marker is not replicated yet
    state.on_high_watermark_updated(12)
    assert state.first_unstable_offset() == 10
    state.on_high_watermark_updated(13)
    assert state.first_unstable_offset() == 11
    assert state.update(*marker(2, 13, commit=True)).last_stable_offset == 14
    state.on_high_watermark_updated(14)
    assert state.first_unstable_offset() is None
    assert state.update(*marker(3, 14, commit=True)) is None  # no data of it here


def test_producers_with_an_open_transaction_are_never_expired_nor_evicted() -> None:
    state = ProducerStateManager(producer_id_expiration_ms=10, max_producers=2)
    state.verify_transaction(1, 0)
    state.update(header(1, 0, 0))
    for pid in (2, 3, 4):
        state.update(header(pid, 0, pid, transactional=False))
    assert state.entry(1) is not None and len(state) == 2
    assert state.remove_expired(now_ms=1_000) == 1
    assert state.entry(1) is not None and state.first_unstable_offset() == 0


OPS = st.lists(st.tuples(st.sampled_from(["write", "commit", "abort", "plain", "hw"]), st.integers(0, 3)),
               max_size=60)


@settings(max_examples=100, deadline=None)
@given(ops=OPS)
def test_transactional_state_matches_a_model_and_survives_snapshots(ops) -> None:
    """Random writes and markers of four producers: the first unstable offset is the first offset
    of the oldest open (or unreplicated) transaction, every abort yields Kafka's index entry, and
    a state rebuilt from a snapshot plus the batches after it equals the incremental one."""
    state = ProducerStateManager()
    seq = [0] * 4
    open_first: dict[int, int] = {}
    unreplicated: dict[int, int] = {}  # first offset -> marker offset
    offset = hw = 0
    history: list[tuple] = []
    snapshot_at = len(ops) // 2
    snapshot = None
    for i, (op, p) in enumerate(ops):
        if i == snapshot_at:
            snapshot = (len(history), state.snapshot())
        pid = 100 + p
        if op == "write":
            if p not in open_first:
                state.verify_transaction(pid, 0)
            h = header(pid, seq[p], offset)
            state.check(h)
            history.append((h, None))
            state.update(h)
            open_first.setdefault(p, offset)
            seq[p] += 1
        elif op == "plain":
            h = header(-1, -1, offset, transactional=False)
            history.append((h, None))
            state.update(h)
        elif op in ("commit", "abort"):
            state.check_marker(pid, 0, 0)
            h, m = marker(pid, offset, op == "commit")
            history.append((h, m))
            completed = state.update(h, m)
            if p in open_first:
                first = open_first.pop(p)
                others = sorted(open_first.values())
                assert completed.first_offset == first and completed.last_offset == offset
                assert completed.is_aborted == (op == "abort")
                assert completed.last_stable_offset == (others[0] if others else offset + 1)
                unreplicated[first] = offset
            else:
                assert completed is None
        else:
            hw = offset
            state.on_high_watermark_updated(hw)
            unreplicated = {f: m for f, m in unreplicated.items() if m >= hw}
        offset += 1
        candidates = list(open_first.values()) + list(unreplicated)
        assert state.first_unstable_offset() == (min(candidates) if candidates else None)
    assert state.ongoing_transactions() == {f: 100 + p for p, f in sorted(open_first.items(), key=lambda x: x[1])}
    if snapshot is not None:
        count, producers = snapshot
        rebuilt = ProducerStateManager.from_snapshot(producers)
        for h, m in history[count:]:
            rebuilt.update(h, m)
        rebuilt.on_high_watermark_updated(hw)
        assert rebuilt.snapshot() == state.snapshot()
        assert rebuilt.ongoing_transactions() == state.ongoing_transactions()


def test_a_snapshot_of_a_kraft_before_transactions_loads() -> None:
    old = [[5, 0, 100, [[0, 0, 0, 0]]]]
    state = ProducerStateManager.from_snapshot(old)
    assert state.entry(5).last_sequence == 0 and state.first_unstable_offset() is None


# -- through the partition log ---------------------------------------------------------------


def test_producers_can_never_write_control_batches(open_log) -> None:
    log = open_log()
    control = bytearray(make_batch(1))
    from kraft.log.batch import ATTRIBUTES_POS, compute_crc
    control[ATTRIBUTES_POS + 1] |= 0x30
    control[17:21] = compute_crc(control, 0, len(control)).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match="control records"):
        log.append_as_leader(bytes(control), 0, 0)
    assert log.log_end_offset == 0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**9), steps=st.integers(1, 120))
def test_read_committed_stops_at_the_lso_and_drops_aborted_records(tmp_path_factory, seed, steps) -> None:
    """Random transactional workloads over rolling segments: LSO <= HW <= LEO always; a
    read_committed reader sees exactly the committed records below the LSO, in order; a
    read_uncommitted one every data record below the HW; neither ever a control record."""
    from kraft.log.config import LogConfig
    from kraft.log.partition_log import PartitionLog
    log = PartitionLog.open(tmp_path_factory.mktemp("p") / "t-0", LogConfig(segment_bytes=600), 0)
    work = TxnWorkload(log, seed)
    for _ in range(steps):
        work.step()
        assert log.log_start_offset <= log.last_stable_offset <= log.high_watermark <= log.log_end_offset
    lso, hw = log.last_stable_offset, log.high_watermark
    data, aborted = read_all(log, read_committed=True)
    expected = sorted((v for v in work.committed if work.offsets[v] < lso), key=work.offsets.get)
    assert visible_values(data, aborted) == expected
    data, _ = read_all(log, read_committed=False)
    assert visible_values(data, None) == sorted((v for v in work.offsets if work.offsets[v] < hw),
                                                key=work.offsets.get)
    log.close()


def _index(log) -> list[AbortedTxn]:
    return [e for s in log.segments for e in s.txn_index.entries]


def test_a_follower_and_a_reopened_log_have_the_same_lso_and_aborted_index(open_log, tmp_path) -> None:
    leader = open_log(segment_bytes=500)
    work = TxnWorkload(leader, seed=11)
    for _ in range(150):
        work.step(checkpoints=False)
    assert _index(leader), "the workload aborted something"
    from kraft.log.config import LogConfig
    from kraft.log.partition_log import PartitionLog
    follower = PartitionLog.open(tmp_path / "f-0", LogConfig(segment_bytes=500), 0)
    offset = 0
    while offset < leader.log_end_offset:
        info = leader.read(offset, 10**6)
        follower.append_as_follower(info.records)
        offset = info.next_offset
    for log in (follower,):
        log.high_watermark = leader.high_watermark
    assert _index(follower) == _index(leader)
    assert follower.last_stable_offset == leader.last_stable_offset
    assert follower._producer_state.ongoing_transactions() == leader._producer_state.ongoing_transactions()
    expected = (_index(leader), leader.last_stable_offset, leader.high_watermark)
    leader.close()
    reopened = open_log(segment_bytes=500)
    assert (_index(reopened), reopened.last_stable_offset, reopened.high_watermark) == expected
    follower.close()


def test_a_marker_whose_index_entry_cannot_be_written_is_not_kept(open_log, monkeypatch, tmp_path) -> None:
    """A full disk between the ABORT marker's write and its `.txnindex` entry's: the marker
    leaves the log again and the append fails, so no marker is served without its entry."""
    log = open_log()
    log.verify_transaction(7, 0)
    log.append_as_leader(transactional_batch(7, 0, [b"a"]), 0, 0)
    flag = tmp_path / "full"
    flag.write_text("1")
    from kraft.log import txn_index
    real = txn_index.TransactionIndex.append

    def full_disk_append(self, txn):
        monkeypatch.setattr(fault_injection, "_DISK_FULL_FILE", str(flag))
        try:
            return real(self, txn)
        finally:
            monkeypatch.setattr(fault_injection, "_DISK_FULL_FILE", None)

    monkeypatch.setattr(txn_index.TransactionIndex, "append", full_disk_append)
    with pytest.raises(OSError) as raised:
        log.append_control(7, 0, 0, False, 0, 0)
    assert raised.value.errno == errno.ENOSPC
    assert log.log_end_offset == 1 and log._producer_state.ongoing_transactions() == {0: 7}
    monkeypatch.setattr(txn_index.TransactionIndex, "append", real)
    log.append_control(7, 0, 0, False, 0, 0)
    assert _index(log) == [AbortedTxn(7, 0, 1, 2)]


def test_retention_deletes_the_txnindex_with_its_segment(open_log) -> None:
    log = open_log(segment_bytes=200, retention_ms=1)
    log.verify_transaction(7, 0)
    log.append_as_leader(transactional_batch(7, 0, [b"x" * 100]), 0, 0)
    log.append_control(7, 0, 0, False, 0, 0)
    for i in range(3):
        log.append_as_leader(make_batch(1, size=150, ts=10_000 + i), 0, 0)
    log.high_watermark = log.log_end_offset
    [index] = [s.txn_index.path for s in log.segments if s.txn_index.entries]
    assert index.exists()
    assert log.delete_old_segments(now_ms=10_000) >= 1
    assert not index.exists() and not any(p.suffix == ".txnindex" for p in log.directory.iterdir())


def test_compaction_removes_aborted_records_then_the_markers(open_log) -> None:
    """An aborted write never shadows the committed value of its key; its records go at the
    first clean, its marker (kept while that pass saw its data) at a later one once the segment
    is older than delete.retention.ms. A committed transaction's marker stays while its data does."""
    log = open_log(segment_bytes=250, cleanup_policy="compact", delete_retention_ms=1_000,
                   min_compaction_lag_ms=0)
    log.append_as_leader(build_batch([(b"k", b"committed", None, 1_000)]), 0, 1_000)
    log.verify_transaction(7, 0)
    log.append_as_leader(transactional_batch(7, 0, [b"aborted"], key=b"k"), 0, 1_000)
    log.append_control(7, 0, 0, False, 0, 1_000)
    log.verify_transaction(8, 0)
    log.append_as_leader(transactional_batch(8, 0, [b"txn-value"], key=b"t"), 0, 1_000)
    log.append_control(8, 0, 0, True, 0, 1_000)
    for i in range(6):
        log.append_as_leader(build_batch([(b"pad%d" % i, b"p" * 80, None, 1_000)]), 0, 1_000)
    log.high_watermark = log.log_end_offset

    def kinds() -> list[tuple[int, object]]:
        out = []
        for segment in log.segments[:-1]:
            data = segment.read(0, segment.size)
            for pos, h in iter_batches(data):
                out.append((h.base_offset, "marker" if h.is_control else [r.value for r in decode_records(data, pos)]))
        return out

    log.compact(now_ms=1_500)
    after_first = kinds()
    assert (0, [b"committed"]) in after_first and all(v != [b"aborted"] for _, v in after_first)
    assert (2, "marker") in after_first and (4, "marker") in after_first  # data seen this pass
    assert [e.last_offset for e in _index(log)] == [2]
    log.compact(now_ms=1_500)  # not yet older than delete.retention.ms
    assert (2, "marker") in kinds()
    log.compact(now_ms=5_000)
    final = kinds()
    assert (2, "marker") not in final and _index(log) == []
    assert (4, "marker") in final and (3, [b"txn-value"]) in final  # its data is still there
    data, aborted = read_all(log, read_committed=True)
    assert b"committed" in visible_values(data, aborted) and b"aborted" not in visible_values(data, aborted)


def test_compaction_never_touches_an_open_transaction(open_log) -> None:
    log = open_log(segment_bytes=200, cleanup_policy="compact", min_compaction_lag_ms=0)
    log.verify_transaction(7, 0)
    log.append_as_leader(transactional_batch(7, 0, [b"open"], key=b"k"), 0, 1_000)
    for i in range(6):
        log.append_as_leader(build_batch([(b"k", b"v%d" % i, None, 1_000)]), 0, 1_000)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 0
    assert log.compact(now_ms=2_000).records_removed == 0
    log.append_control(7, 0, 0, True, 0, 1_000)
    log.high_watermark = log.log_end_offset
    assert log.compact(now_ms=2_000).records_removed > 0

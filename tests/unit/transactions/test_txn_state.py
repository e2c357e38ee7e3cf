"""The transaction coordinator's rules (pure): Kafka's answers per state, and a hypothesis model
of a transactional id driven by two producers (the current one and a zombie) through random
requests, markers and timeouts: epochs never go back, a producer older than the current epoch is
always fenced, partitions exist only in an open or ending transaction, and a transaction ends
with the outcome it was prepared with."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kraft.broker.transactions.records import TransactionsReplay, record
from kraft.broker.transactions.state import (
    MAX_EPOCH, TransactionMetadata, TxnError, TxnState, add_partitions, check_timeout, complete,
    end_transaction, init_producer_id, timed_out,
)

TID = "txn-a"
TP = ("t", 0)


def _raises(code: str, fn, *args) -> None:
    with pytest.raises(TxnError) as e:
        fn(*args)
    assert e.value.error_code == code, e.value


def ongoing(epoch: int = 0, start: int = 100) -> TransactionMetadata:
    return TransactionMetadata(TID, 7, epoch, 1000, TxnState.ONGOING, frozenset({TP}), start, start)


def test_a_new_id_gets_the_allocated_producer_id_at_epoch_zero() -> None:
    t = init_producer_id(None, TID, 1000, 42, 5)
    assert t.error is None and t.metadata is not None
    assert (t.metadata.producer_id, t.metadata.producer_epoch, t.metadata.state) == (42, 0, TxnState.EMPTY)


def test_init_bumps_the_epoch_and_an_exhausted_epoch_takes_a_new_producer_id() -> None:
    done = TransactionMetadata(TID, 7, 3, 1000, TxnState.COMPLETE_COMMIT)
    assert init_producer_id(done, TID, 500, 99, 5).metadata == TransactionMetadata(
        TID, 7, 4, 500, TxnState.EMPTY, txn_last_update_timestamp=5)
    worn = TransactionMetadata(TID, 7, MAX_EPOCH - 1, 1000, TxnState.EMPTY)
    meta = init_producer_id(worn, TID, 1000, 99, 5).metadata
    assert meta is not None and (meta.producer_id, meta.producer_epoch) == (99, 0)


def test_init_during_an_open_transaction_aborts_it_under_a_bumped_epoch() -> None:
    t = init_producer_id(ongoing(epoch=2), TID, 1000, 99, 500)
    assert t.error == "CONCURRENT_TRANSACTIONS" and t.metadata is not None
    assert (t.metadata.state, t.metadata.producer_epoch, t.metadata.partitions) == (
        TxnState.PREPARE_ABORT, 3, frozenset({TP}))
    _raises("CONCURRENT_TRANSACTIONS", init_producer_id, t.metadata, TID, 1000, 99, 600)


def test_add_partitions_checks_the_producer_and_the_state() -> None:
    empty = TransactionMetadata(TID, 7, 2, 1000, TxnState.EMPTY)
    _raises("INVALID_PRODUCER_ID_MAPPING", add_partitions, None, TID, 7, 2, [TP], 1)
    _raises("INVALID_PRODUCER_ID_MAPPING", add_partitions, empty, TID, 8, 2, [TP], 1)
    _raises("PRODUCER_FENCED", add_partitions, empty, TID, 7, 1, [TP], 1)
    t = add_partitions(empty, TID, 7, 2, [TP], 50)
    assert t.metadata is not None and t.metadata.state is TxnState.ONGOING and t.metadata.txn_start_timestamp == 50
    assert add_partitions(t.metadata, TID, 7, 2, [TP], 60).metadata is None  # nothing new: nothing logged
    more = add_partitions(t.metadata, TID, 7, 2, [("t", 1)], 70).metadata
    assert more is not None and more.partitions == {TP, ("t", 1)} and more.txn_start_timestamp == 50
    prepared = end_transaction(more, TID, 7, 2, True, 80).metadata
    _raises("CONCURRENT_TRANSACTIONS", add_partitions, prepared, TID, 7, 2, [TP], 90)


@pytest.mark.parametrize("state, commit, answer", [
    (TxnState.ONGOING, True, TxnState.PREPARE_COMMIT),
    (TxnState.ONGOING, False, TxnState.PREPARE_ABORT),
    (TxnState.COMPLETE_COMMIT, True, None),  # a retry of a done EndTxn succeeds
    (TxnState.COMPLETE_ABORT, False, None),
    (TxnState.PREPARE_COMMIT, True, "CONCURRENT_TRANSACTIONS"),
    (TxnState.PREPARE_ABORT, False, "CONCURRENT_TRANSACTIONS"),
    (TxnState.PREPARE_COMMIT, False, "INVALID_TXN_STATE"),
    (TxnState.PREPARE_ABORT, True, "INVALID_TXN_STATE"),
    (TxnState.COMPLETE_COMMIT, False, "INVALID_TXN_STATE"),
    (TxnState.COMPLETE_ABORT, True, "INVALID_TXN_STATE"),
    (TxnState.EMPTY, True, "INVALID_TXN_STATE"),
])
def test_end_transaction_answers_as_kafka_per_state(state: TxnState, commit: bool, answer: object) -> None:
    parts = frozenset({TP}) if state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) else frozenset()
    meta = TransactionMetadata(TID, 7, 1, 1000, state, parts, 10 if parts else -1)
    if isinstance(answer, str):
        _raises(answer, end_transaction, meta, TID, 7, 1, commit, 20)
        return
    t = end_transaction(meta, TID, 7, 1, commit, 20)
    assert (None if t.metadata is None else t.metadata.state) == answer


def test_timeout_aborts_only_a_transaction_past_its_deadline() -> None:
    meta = ongoing(epoch=4, start=100)
    assert timed_out(meta, 1099) is None
    aborted = timed_out(meta, 1100)
    assert aborted is not None and (aborted.state, aborted.producer_epoch) == (TxnState.PREPARE_ABORT, 5)
    assert timed_out(TransactionMetadata(TID, 7, 1, 1000, TxnState.EMPTY), 10**9) is None
    assert complete(aborted, 1200).state is TxnState.COMPLETE_ABORT and not complete(aborted, 1200).partitions


def test_timeouts_outside_the_bounds_are_refused() -> None:
    check_timeout(900_000, 900_000)
    for bad in (0, -1, 900_001):
        _raises("INVALID_TRANSACTION_TIMEOUT", check_timeout, bad, 900_000)


def test_records_round_trip_and_bad_records_are_skipped() -> None:
    replay = TransactionsReplay()
    meta = ongoing(epoch=3)
    replay.replay(*record(meta))
    replay.replay(b"\xc1", b"junk")
    replay.replay(record(meta)[0], b"\x81\xa1v\x01")  # a map without the fields
    assert replay.transactions == {TID: meta} and replay.skipped == 2


# -- the model ---------------------------------------------------------------------------------

_OPS = st.lists(st.tuples(
    st.sampled_from(["init", "add", "commit", "abort", "markers", "tick"]),
    st.booleans(),  # the zombie (the producer of the epoch before) asks instead
    st.integers(0, 3),  # which partition / how long a tick is (x 400 ms)
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_model_epochs_fencing_and_outcomes(ops: list[tuple[str, bool, int]]) -> None:
    meta: TransactionMetadata | None = None
    now = 0
    producer: tuple[int, int] | None = None  # what the current producer believes
    zombie: tuple[int, int] | None = None
    prepared_commit: bool | None = None
    for op, as_zombie, n in ops:
        before = meta
        who = (zombie if as_zombie else producer) if op in ("add", "commit", "abort") else None
        try:
            if op == "init":
                t = init_producer_id(meta, TID, 1000, 1000 + now, now)
                meta = t.metadata
                assert meta is not None
                if t.error is None:
                    zombie, producer = producer, (meta.producer_id, meta.producer_epoch)
            elif op == "tick":
                now += n * 400
                if meta is not None and (aborted := timed_out(meta, now)) is not None:
                    meta = aborted
            elif op == "markers":
                if meta is not None and meta.state.is_prepare:
                    meta = complete(meta, now)
            elif who is not None:
                if op == "add":
                    meta = add_partitions(meta, TID, *who, [("t", n)], now).metadata or meta
                else:
                    meta = end_transaction(meta, TID, *who, op == "commit", now).metadata or meta
            else:
                continue
        except TxnError as e:
            if who is not None and before is not None and who[0] == before.producer_id:
                # a request of an older epoch is always fenced, never served
                assert who[1] == before.producer_epoch or e.error_code == "PRODUCER_FENCED"
            meta = before
        if meta is None:
            continue
        if before is not None:
            # epochs never go back for a producer id; a new id only when the epoch ran out
            assert meta.producer_id != before.producer_id or meta.producer_epoch >= before.producer_epoch
        if who is not None and before is not None and who[1] < before.producer_epoch and who[0] == before.producer_id:
            assert meta == before or op in ("init", "tick", "markers")  # the zombie changed nothing
        if meta.partitions:
            assert meta.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        if meta.state.is_prepare:
            prepared_commit = meta.state is TxnState.PREPARE_COMMIT
        if meta.state.is_complete and before is not None and before.state.is_prepare:
            assert (meta.state is TxnState.COMPLETE_COMMIT) == prepared_commit

"""ProducerStateManager (pure): sequence rules, duplicates, fencing, expiry, eviction, snapshots;
property: any delivery order of retried, duplicated and reordered batches writes each sequence
once and in order, and the state rebuilt from the appended headers equals the incremental one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log.batch import MAGIC, BatchHeader
from kraft.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)
from kraft.log.producer_state import (
    APPEND,
    INT32_MAX,
    UNKNOWN_OFFSETS_DUPLICATE,
    Duplicate,
    ProducerStateManager,
    increment_sequence,
)


def header(pid: int, epoch: int, seq: int, count: int = 1, offset: int = 0, ts: int = 0) -> BatchHeader:
    return BatchHeader(
        base_offset=offset, batch_length=49, partition_leader_epoch=0, magic=MAGIC, crc=0,
        attributes=0, last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, record_count=count,
    )


class Leader:
    """A leader's append path over the pure manager: check, stamp offsets, update."""

    def __init__(self, state: ProducerStateManager | None = None) -> None:
        self.state = state or ProducerStateManager()
        self.log_end_offset = 0
        self.appended: list[BatchHeader] = []

    def append(self, h: BatchHeader) -> tuple[int, int]:
        verdict = self.state.check(h)
        if isinstance(verdict, Duplicate):
            return verdict.first_offset, verdict.last_offset
        stamped = header(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count,
                         self.log_end_offset, h.max_timestamp)
        self.state.update(stamped)
        self.appended.append(stamped)
        self.log_end_offset = stamped.last_offset + 1
        return stamped.base_offset, stamped.last_offset


def test_in_sequence_batches_append_and_a_retry_gets_its_original_offsets() -> None:
    leader = Leader()
    assert leader.append(header(7, 0, 0, count=3)) == (0, 2)
    assert leader.append(header(7, 0, 3, count=2)) == (3, 4)
    assert leader.state.check(header(7, 0, 0, count=3)) == Duplicate(0, 2, 0)
    assert leader.append(header(7, 0, 3, count=2)) == (3, 4)
    assert leader.log_end_offset == 5


def test_out_of_order_unknown_and_fenced_batches_are_refused() -> None:
    leader = Leader()
    with pytest.raises(UnknownProducerIdError):
        leader.state.check(header(7, 0, 5))
    leader.append(header(7, 1, 0, count=2))
    with pytest.raises(OutOfOrderSequenceError):
        leader.state.check(header(7, 1, 3))  # sequence 2 was skipped
    with pytest.raises(OutOfOrderSequenceError):
        leader.state.check(header(7, 1, 1, count=2))  # half written before, half new
    with pytest.raises(InvalidProducerEpochError):
        leader.state.check(header(7, 0, 2))  # older epoch: a zombie
    with pytest.raises(OutOfOrderSequenceError):
        leader.state.check(header(7, 2, 1))  # a new epoch starts at 0
    assert leader.state.check(header(7, 2, 0)) == APPEND
    with pytest.raises(InvalidRecordError):
        leader.state.check(header(7, -1, 0))
    assert leader.state.check(header(-1, -1, -1)) == APPEND  # not idempotent: never checked


def ahead(state: ProducerStateManager, *headers: BatchHeader) -> bool:
    """Whether the refusal of `headers` (one request) says a predecessor could still come."""
    with pytest.raises((OutOfOrderSequenceError, UnknownProducerIdError)) as refused:
        state.check_batches(headers)
    return refused.value.ahead


def test_a_refusal_says_whether_the_batch_is_ahead_of_its_predecessor() -> None:
    """The leader waits for the predecessor of a batch ahead of the expected sequence (sent on
    another connection), not for one behind it or after a gap inside its own request."""
    leader = Leader()
    assert ahead(leader.state, header(7, 0, 5))  # unknown producer: sequence 0 may be on its way
    leader.append(header(7, 0, 0, count=2))
    assert ahead(leader.state, header(7, 0, 3))  # expected 2
    assert not ahead(leader.state, header(7, 0, 1, count=2))  # behind: half written before
    assert ahead(leader.state, header(7, 1, 4))  # a new epoch's sequence 0 may be on its way
    assert not ahead(leader.state, header(7, 0, 2), header(7, 0, 4))  # the gap is in the request


def test_the_last_five_batches_keep_their_offsets_older_ones_are_duplicates_without() -> None:
    leader = Leader()
    for seq in range(0, 14, 2):
        leader.append(header(1, 0, seq, count=2))
    assert leader.state.check(header(1, 0, 4, count=2)) == Duplicate(4, 5, 0)
    assert leader.state.check(header(1, 0, 2, count=2)) == UNKNOWN_OFFSETS_DUPLICATE
    assert leader.state.check(header(1, 0, 1, count=5)) == UNKNOWN_OFFSETS_DUPLICATE  # other split
    with pytest.raises(OutOfOrderSequenceError):
        leader.state.check(header(1, 0, 12, count=3))  # partly new: neither a retry nor next


def test_a_new_epoch_forgets_the_old_epochs_batches() -> None:
    leader = Leader()
    leader.append(header(1, 0, 0))
    leader.append(header(1, 1, 0))
    with pytest.raises(InvalidProducerEpochError):
        leader.state.check(header(1, 0, 0))
    assert leader.state.check(header(1, 1, 0)) == Duplicate(1, 1, 0)


def test_check_batches_sees_the_earlier_batches_of_the_request() -> None:
    state = ProducerStateManager()
    state.update(header(1, 0, 0, offset=0))
    verdicts = state.check_batches([header(1, 0, 0), header(1, 0, 1), header(1, 0, 2), header(2, 0, 0)])
    assert verdicts == (Duplicate(0, 0, 0), APPEND, APPEND, APPEND)
    with pytest.raises(OutOfOrderSequenceError):
        state.check_batches([header(1, 0, 1), header(1, 0, 3)])
    assert state.entry(1).last_sequence == 0  # checking changed nothing


def test_sequences_wrap_at_int32_max() -> None:
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    state = ProducerStateManager()
    state.update(header(1, 0, INT32_MAX - 1, count=3))  # sequences INT32_MAX - 1, INT32_MAX, 0
    assert state.check(header(1, 0, 1)) == APPEND
    assert state.check(header(1, 0, INT32_MAX - 1, count=3)) == Duplicate(0, 2, 0)
    assert state.check(header(1, 0, 0)) == UNKNOWN_OFFSETS_DUPLICATE  # written, in the wrap


def test_idle_producers_expire_and_the_oldest_is_evicted_past_the_bound() -> None:
    state = ProducerStateManager(producer_id_expiration_ms=1000, max_producers=2)
    state.update(header(1, 0, 0, ts=100))
    state.update(header(2, 0, 0, ts=500))
    assert state.remove_expired(now_ms=1099) == 0
    assert state.remove_expired(now_ms=1100) == 1 and state.entry(1) is None
    state.update(header(3, 0, 0, ts=600))
    state.update(header(2, 0, 1, ts=700))  # 2 written last: 3 is now the least recent
    state.update(header(4, 0, 0, ts=800))
    assert [e[0] for e in state.snapshot()] == [2, 4]


# -- property: delivery in any order ---------------------------------------------------------------

PRODUCERS = 2
EPOCHS = 2
BATCHES = 6

deliveries = st.lists(
    st.tuples(st.integers(0, PRODUCERS - 1), st.integers(0, EPOCHS - 1), st.integers(0, BATCHES - 1)),
    max_size=60,
)
sizes = st.lists(st.integers(1, 3), min_size=PRODUCERS * EPOCHS * BATCHES,
                 max_size=PRODUCERS * EPOCHS * BATCHES)


def _batch(sizes: list[int], pid: int, epoch: int, k: int) -> BatchHeader:
    row = (pid * EPOCHS + epoch) * BATCHES
    return header(pid, epoch, sum(sizes[row:row + k]), count=sizes[row + k])


@settings(max_examples=300, deadline=None)
@given(deliveries, sizes)
def test_any_delivery_order_writes_each_sequence_once_and_in_order(deliveries, sizes) -> None:
    leader = Leader(ProducerStateManager())
    where: dict[tuple[int, int, int], tuple[int, int]] = {}
    for pid, epoch, k in deliveries:
        try:
            offsets = leader.append(_batch(sizes, pid, epoch, k))
        except (OutOfOrderSequenceError, InvalidProducerEpochError, UnknownProducerIdError):
            continue
        # a batch answered twice is answered with the same offsets (the original append), or
        # with unknown offsets (-1) once it is older than the five batches kept
        if offsets != (-1, -1):
            assert where.setdefault((pid, epoch, k), offsets) == offsets
    for pid in range(PRODUCERS):
        mine = [h for h in leader.appended if h.producer_id == pid]
        assert [h.producer_epoch for h in mine] == sorted(h.producer_epoch for h in mine)
        for epoch in range(EPOCHS):
            runs = [h for h in mine if h.producer_epoch == epoch]
            expected = 0
            for h in runs:  # sequences 0, 1, 2, ... each once, with no gap
                assert h.base_sequence == expected
                expected += h.record_count
    rebuilt = ProducerStateManager()
    for stamped in leader.appended:
        rebuilt.update(stamped)
    assert rebuilt.snapshot() == leader.state.snapshot()
    restored = ProducerStateManager.from_snapshot(leader.state.snapshot())
    assert restored.snapshot() == leader.state.snapshot()


@settings(max_examples=100, deadline=None)
@given(sizes, st.lists(st.integers(0, BATCHES - 1), max_size=30))
def test_retries_after_lost_answers_complete_the_stream_exactly_once(sizes, retries) -> None:
    """A producer re-sends unanswered batches (the last five, any number of times) and then
    everything from the start in order: the log ends with every batch exactly once."""
    leader = Leader()
    sent = 0
    for k in retries:
        for j in range(sent, min(k + 1, BATCHES)):  # first sends, in order
            leader.append(_batch(sizes, 0, 0, j))
        sent = max(sent, k + 1)
        for j in range(max(0, sent - 5), sent):  # the lost answers: all re-sent
            leader.append(_batch(sizes, 0, 0, j))
    for j in range(BATCHES):
        leader.append(_batch(sizes, 0, 0, j))
    assert [h.base_sequence for h in leader.appended] == [_batch(sizes, 0, 0, j).base_sequence
                                                          for j in range(BATCHES)]

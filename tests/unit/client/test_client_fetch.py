"""The consumer's pure parts: subscription positions and decoding fetched batches."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.api.client.fetcher import records_from_batches
from kraft.api.client.subscription import SubscriptionState
from kraft.api.client.types import TopicPartition
from kraft.api.errors import KraftError
from kraft.log.batch import build_batch, stamp
from kraft.log.control import build_marker_batch
from transactions_support import stamped

TP = TopicPartition("t", 0)


def log_of(batch_sizes: list[int]) -> bytes:
    """Concatenated batches with consecutive offsets; record i has value str(i)."""
    out = bytearray()
    offset = 0
    for n in batch_sizes:
        batch = bytearray(build_batch([(None, str(offset + i).encode(), None, 1000 + offset + i) for i in range(n)]))
        stamp(batch, 0, offset, 0)
        out += batch
        offset += n
    return bytes(out)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.data())
def test_records_from_the_fetch_offset_on(sizes: list[int], data: st.DataObject) -> None:
    total = sum(sizes)
    fetch_offset = data.draw(st.integers(0, total - 1))
    records, next_offset = records_from_batches(TP, log_of(sizes), fetch_offset)
    assert [r.offset for r in records] == list(range(fetch_offset, total))
    assert [r.value for r in records] == [str(i).encode() for i in range(fetch_offset, total)]
    assert next_offset == total and records[0].timestamp == 1000 + fetch_offset


def test_incomplete_trailing_batch_is_left_for_the_next_fetch() -> None:
    data = log_of([3, 4])
    cut = data[:-5]
    records, next_offset = records_from_batches(TP, cut, 1)
    assert [r.offset for r in records] == [1, 2] and next_offset == 3
    assert records_from_batches(TP, b"", 7) == ([], 7)


def test_subscription_positions() -> None:
    subs = SubscriptionState("earliest")
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    subs.assign([a, b])
    assert subs.needs_reset() == {a: "earliest", b: "earliest"} and subs.fetchable() == {}
    subs.seek(a, 5)
    subs.request_reset(b, "latest")
    assert subs.needs_reset() == {b: "latest"} and subs.fetchable() == {a: 5}
    subs.assign([a])  # a keeps its position
    assert subs.assignment() == {a} and subs.position(a) == 5
    with pytest.raises(KraftError):
        subs.position(b)
    with pytest.raises(KraftError):
        subs.seek(a, -1)
    strict = SubscriptionState("none")
    strict.assign([a])
    with pytest.raises(KraftError) as err:
        strict.needs_reset()
    assert err.value.error_code == "OFFSET_OUT_OF_RANGE"


def _txn(pid: int, value: bytes) -> bytes:
    return build_batch([(None, value, None, 1)], producer_id=pid, producer_epoch=0, base_sequence=0,
                       transactional=True)


def _marker(pid: int, commit: bool) -> bytes:
    return build_marker_batch(producer_id=pid, producer_epoch=0, coordinator_epoch=0, commit=commit, timestamp=1)


def test_markers_never_reach_the_application_and_read_committed_drops_aborted_records() -> None:
    """A marker is read past (the position moves beyond it even when nothing else came); with a
    read_committed answer's aborted transactions, their batches are read past too."""
    data = stamped([_txn(1, b"aborted"), _txn(2, b"committed"), _marker(1, False), _marker(2, True)])
    records, next_offset = records_from_batches(TP, data, 0)
    assert [r.value for r in records] == [b"aborted", b"committed"] and next_offset == 4
    records, next_offset = records_from_batches(TP, data, 0, aborted=[(1, 0)])
    assert [r.value for r in records] == [b"committed"] and next_offset == 4
    assert records_from_batches(TP, data, 2) == ([], 4)  # only markers: the position still moves

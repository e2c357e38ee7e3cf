"""The follower's answer handling: append, truncation to the leader's epoch boundary, restarts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.broker.replication.follower import (
    Append, Backoff, PartitionFetchResponse, Truncate, TruncateFully, on_fetch_response,
    truncation_offset,
)
from kraft.broker.replication.leader import EpochEndOffset, diverging_epoch
from kraft.log.epoch_cache import LeaderEpochFileCache


def cache_of(epochs: list[int]) -> LeaderEpochFileCache:
    """The epoch cache of a log whose offset i was written in epochs[i]."""
    cache = LeaderEpochFileCache(None)
    for offset, epoch in enumerate(epochs):
        cache.assign(epoch, offset)
    return cache


def response(**kw) -> PartitionFetchResponse:
    base = dict(high_watermark=5, log_start_offset=0, log_end_offset=10, records=b"")
    return PartitionFetchResponse(**{**base, **kw})


def test_append_and_errors() -> None:
    end_for = cache_of([0, 0]).end_offset_for
    assert on_fetch_response(response(records=b"x"), 2, lambda e: end_for(e, 2), 0) == Append(b"x", 5, 0)
    assert on_fetch_response(response(error_code="FENCED_LEADER_EPOCH"), 2, lambda e: (e, 2), 0) == \
        Backoff("FENCED_LEADER_EPOCH")
    # longer than the leader with no epoch to compare: cut to the leader's log end
    assert on_fetch_response(response(error_code="OFFSET_OUT_OF_RANGE"), 12, lambda e: (e, 12), None) == \
        Truncate(10)
    assert on_fetch_response(response(error_code="OFFSET_OUT_OF_RANGE", log_start_offset=20,
                                      log_end_offset=30), 3, lambda e: (e, 3), None) == TruncateFully(20)


def test_truncation_cases() -> None:
    mine = cache_of([1, 1, 2, 2, 4, 4])  # epochs 1@0, 2@2, 4@4; leo 6
    end_for = lambda e: mine.end_offset_for(e, 6)  # noqa: E731
    # the leader knows epoch 2 and it ends at 3 there
    assert truncation_offset(EpochEndOffset(2, 3), end_for, 4, 6) == 3
    # the leader ends epoch 2 later than we do: our own end of epoch 2 (4) wins
    assert truncation_offset(EpochEndOffset(2, 9), end_for, 4, 6) == 4
    # the leader answers epoch 3, which we never had: cut at the end of our epoch below it (2)
    assert truncation_offset(EpochEndOffset(3, 5), end_for, 4, 6) == 4
    # the leader knows none of our epochs: drop our latest epoch
    assert truncation_offset(EpochEndOffset(-1, -1), end_for, 4, 6) == 4


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=0, max_size=8),
       st.lists(st.integers(0, 3), max_size=8), st.lists(st.integers(0, 3), max_size=8))
def test_truncation_converges_to_a_prefix_common_with_the_leader(
    common: list[int], leader_tail: list[int], follower_tail: list[int]
) -> None:
    """Two logs sharing `common`, then diverging (epochs non-decreasing, the leader's tail in
    epochs the follower never wrote in after the split): the fetch/diverging-epoch exchange ends
    with the follower holding a prefix of the leader's log, never cutting into `common`."""
    common = sorted(common)
    base = common[-1] if common else 0
    follower = common + sorted(base + 1 + 2 * e for e in follower_tail)  # odd-ish epochs: its own
    leader_epochs = common + sorted(base + 2 + 2 * e for e in leader_tail)  # even: the leader's
    leader_cache = cache_of(leader_epochs)
    for _ in range(50):
        fcache = cache_of(follower)
        latest = fcache.latest_entry
        div = diverging_epoch(lambda e: leader_cache.end_offset_for(e, len(leader_epochs)),
                              -1 if latest is None else latest.epoch, len(follower))
        if div is None and len(follower) <= len(leader_epochs):
            break
        resp = (PartitionFetchResponse(0, 0, len(leader_epochs), b"", div) if div is not None else
                PartitionFetchResponse(0, 0, len(leader_epochs), b"", None, "OFFSET_OUT_OF_RANGE"))
        action = on_fetch_response(resp, len(follower),
                                   lambda e: fcache.end_offset_for(e, len(follower)),
                                   None if latest is None else latest.start_offset)
        assert isinstance(action, Truncate)
        assert action.offset < len(follower)  # progress
        follower = follower[:action.offset]
    else:
        raise AssertionError("truncation did not converge")
    assert follower == leader_epochs[:len(follower)]
    assert len(follower) >= len(common)

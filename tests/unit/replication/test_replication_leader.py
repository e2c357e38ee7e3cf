"""LeaderState: high watermark, follower caught-up tracking, ISR shrink/expand, divergence check."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.broker.replication.leader import (
    EpochEndOffset, IsrProposal, LeaderState, diverging_epoch,
)
from kraft.log.epoch_cache import LeaderEpochFileCache
from kraft.metadata.partition_change import BrokerState

LAG = 30_000


def leader(isr=(1, 2, 3), replicas=(1, 2, 3), now=0, epoch_start=0) -> LeaderState:
    return LeaderState.become_leader(1, 5, epoch_start, 7, replicas, isr, now)


def test_high_watermark_is_smallest_isr_leo_and_waits_for_unknown_followers() -> None:
    s = leader()
    assert s.high_watermark(10, 0, 2) == 0  # followers not heard from yet
    s.on_follower_fetch(2, 10, 10, 1)
    assert s.high_watermark(10, 0, 2) == 0
    s.on_follower_fetch(3, 4, 10, 1)
    assert s.high_watermark(10, 0, 2) == 4
    assert s.high_watermark(10, 6, 2) == 6  # never backwards


def test_high_watermark_stops_below_min_isr_but_counts_min_of_rf() -> None:
    s = leader(isr=(1,))
    assert s.high_watermark(10, 3, 2) == 3  # ISR 1 < min.insync.replicas 2
    single = LeaderState.become_leader(1, 0, 0, 0, (1,), (1,), 0)
    assert single.high_watermark(10, 3, 2) == 10  # min(RF 1, 2) = 1


def test_out_of_sync_after_lag_time_unless_at_leader_leo() -> None:
    s = leader(now=0)
    s.on_follower_fetch(2, 10, 10, 100)  # caught up at 100
    s.on_follower_fetch(3, 5, 10, 100)  # behind since it became leader at 0
    assert s.out_of_sync_replicas(10, LAG, LAG) == []
    assert s.out_of_sync_replicas(20, LAG + 1, LAG) == [3]
    assert s.out_of_sync_replicas(20, LAG + 101, LAG) == [2, 3]
    # an idle partition: a follower at the leader's LEO is never out of sync
    assert s.out_of_sync_replicas(10, 10 * LAG, LAG) == [3]


def test_caught_up_as_of_previous_fetch() -> None:
    s = leader(now=0)
    s.on_follower_fetch(2, 10, 10, 1000)
    s.on_follower_fetch(2, 10, 20, 2000)  # reached what the leader had at 1000
    assert s.followers[2].last_caught_up_time_ms == 1000
    s.on_follower_fetch(2, 20, 30, 3000)  # reached the LEO of the 2000 fetch
    assert s.followers[2].last_caught_up_time_ms == 2000


def test_shrink_proposal_then_commit_clears_pending() -> None:
    s = leader(now=0)
    s.on_follower_fetch(2, 10, 10, LAG, broker_epoch=42)
    proposal = s.propose_isr_change(10, 0, LAG + 1, LAG, lambda r: True, 5000)
    # KIP-903: each member with the epoch of the process whose position counted (-1: the leader)
    assert proposal == IsrProposal(5, 7, (BrokerState(1, -1), BrokerState(2, 42)))
    assert s.propose_isr_change(10, 0, LAG + 2, LAG, lambda r: True, 5000) is None  # in flight
    assert s.maximal_isr == (1, 2, 3)  # the committed, larger ISR counts until the commit
    s.on_metadata(8, (1, 2, 3), (1, 2))
    assert s.pending is None and s.isr == (1, 2)


def test_expand_needs_hw_and_epoch_start_and_eligibility() -> None:
    s = leader(isr=(1, 2), now=0, epoch_start=8)
    s.on_follower_fetch(3, 7, 10, 1)
    assert s.propose_isr_change(10, 5, 2, LAG, lambda r: True, 5000) is None  # below epoch start
    s.on_follower_fetch(3, 9, 10, 3, broker_epoch=17)
    assert s.propose_isr_change(10, 10, 4, LAG, lambda r: True, 5000) is None  # below the HW
    assert s.propose_isr_change(10, 9, 4, LAG, lambda r: False, 5000) is None  # fenced
    proposal = s.propose_isr_change(10, 9, 4, LAG, lambda r: True, 5000)
    assert proposal is not None and proposal.new_isr == (1, 2, 3)
    assert proposal.new_isr_with_epochs[2] == BrokerState(3, 17)  # the joiner's epoch goes along
    # KIP-497: the joining replica already counts for the high watermark
    assert s.maximal_isr == (1, 2, 3)
    s.on_follower_fetch(2, 10, 10, 5)
    assert s.high_watermark(10, 9, 2) == 9


def test_refused_proposal_is_retried_and_lost_one_expires() -> None:
    s = leader(isr=(1, 2), now=0)
    s.on_follower_fetch(3, 10, 10, 1)
    p = s.propose_isr_change(10, 0, 2, LAG, lambda r: True, 5000)
    assert p is not None
    s.on_alter_failed(p)
    p2 = s.propose_isr_change(10, 0, 3, LAG, lambda r: True, 5000)
    assert p2 == p
    assert s.propose_isr_change(10, 0, 4, LAG, lambda r: True, 5000) is None
    assert s.propose_isr_change(10, 0, 5004, LAG, lambda r: True, 5000) == p


def test_diverging_epoch_follows_kafka_rule() -> None:
    cache = LeaderEpochFileCache(None)
    cache.assign(1, 0)
    cache.assign(3, 10)
    leo = 15

    def end_for(epoch: int) -> tuple[int, int]:
        return cache.end_offset_for(epoch, leo)

    assert diverging_epoch(end_for, -1, 12) is None
    assert diverging_epoch(end_for, 3, 15) is None
    assert diverging_epoch(end_for, 3, 16) == EpochEndOffset(3, 15)
    assert diverging_epoch(end_for, 1, 10) is None
    assert diverging_epoch(end_for, 1, 12) == EpochEndOffset(1, 10)
    assert diverging_epoch(end_for, 2, 12) == EpochEndOffset(1, 10)  # epoch 2 unknown here
    assert diverging_epoch(end_for, 4, 12) == EpochEndOffset(-1, -1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([2, 3]), st.integers(0, 50), st.integers(0, 3)),
                max_size=60))
def test_hw_never_backwards_nor_past_an_isr_member(steps: list[tuple[int, int, int]]) -> None:
    """Random follower fetches, appends and ISR commits: the HW never moves backwards and never
    passes the LEO of a maximal-ISR member."""
    s = leader(now=0)
    leo, hw, now = 0, 0, 0
    isr_choices = [(1, 2, 3), (1, 2), (1, 3), (1,)]
    partition_epoch = 7
    for replica, grow, isr_pick in steps:
        now += 100
        leo += grow
        fetch_offset = min(leo, s.followers[replica].log_end_offset + grow) if \
            s.followers[replica].log_end_offset >= 0 else min(leo, grow)
        s.on_follower_fetch(replica, max(fetch_offset, s.followers[replica].log_end_offset, 0),
                            leo, now)
        if grow % 7 == 0:
            proposal = s.propose_isr_change(leo, hw, now, 250, lambda r: True, 1000)
            if proposal is not None and isr_pick % 2:
                partition_epoch += 1
                s.on_metadata(partition_epoch, (1, 2, 3), proposal.new_isr)
        elif isr_pick == 3:
            partition_epoch += 1
            s.on_metadata(partition_epoch, (1, 2, 3), isr_choices[grow % 4])
        new_hw = s.high_watermark(leo, hw, 2)
        assert new_hw >= hw
        if new_hw > hw:
            for member in s.maximal_isr:
                if member != 1:
                    assert s.followers[member].log_end_offset >= new_hw
            assert len(s.isr) >= 2
        assert new_hw <= leo
        hw = new_hw


def test_the_joiner_of_an_expansion_given_up_counts_until_the_metadata_moves_on() -> None:
    """Seed 401074 (metadata stalls, held-up messages): the expansion adding broker 2 committed
    but its answer was lost; after the retry interval the leader gave the proposal up and went on
    from its committed ISR without 2, which had restarted with a shorter log, and acknowledged a
    record 2 lacked, though 2 was in the controller's ISR. Its outcome unknown, 2 still counts."""
    s = leader(isr=(1, 3), now=0)
    s.on_follower_fetch(3, 10, 10, 1)
    s.on_follower_fetch(2, 10, 10, 1)
    proposal = s.propose_isr_change(10, 10, 2, LAG, lambda r: True, 500)
    assert proposal is not None and proposal.new_isr == (1, 3, 2)  # its answer never comes
    s.on_follower_fetch(2, 5, 30, 600)  # 2 restarted with less: not a candidate any more
    s.on_follower_fetch(3, 30, 30, 600)
    assert s.propose_isr_change(30, 10, 601, LAG, lambda r: True, 500) is None  # given up, nothing new
    assert s.pending is None and 2 in s.maximal_isr
    assert s.high_watermark(30, 10, 2) == 10  # not past broker 2's log end... nor backwards
    s.on_metadata(8, (1, 2, 3), (1, 3))  # the truth: the expansion did not commit
    assert s.maximal_isr == (1, 3) and s.high_watermark(30, 10, 2) == 30

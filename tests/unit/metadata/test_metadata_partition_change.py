"""Leader election and ISR rules (PartitionChangeBuilder, KIP-841 fencing, preferred election)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from metadata_testing import EPOCH, build, cluster_records, replay, topic_records

from kraft.metadata.errors import MetadataError
from kraft.metadata.image import BrokerRegistration, ClusterImage, PartitionRegistration
from kraft.metadata.partition_change import (
    BrokerState, ElectionType, PartitionChangeBuilder, check_isr_change, fence_broker_changes,
    preferred_leader_change, unfence_broker_changes,
)
from kraft.metadata.records import NO_LEADER, FenceBroker, PartitionChange, UnfenceBroker


def reg(replicas, isr, leader) -> PartitionRegistration:
    return PartitionRegistration(tuple(replicas), tuple(isr), leader)


def elect(r: PartitionRegistration, alive, isr=None, unclean=False, election=ElectionType.ONLINE):
    b = PartitionChangeBuilder("tid", 0, r, lambda x: x in alive, unclean_allowed=unclean).set_election(election)
    if isr is not None:
        b.set_target_isr(isr)
    return b.build()


def test_keeps_a_valid_leader() -> None:
    assert elect(reg([1, 2, 3], [1, 2, 3], 2), {1, 2, 3}) is None


def test_failover_picks_first_replica_in_isr_that_is_alive() -> None:
    change = elect(reg([1, 2, 3], [1, 2, 3], 1), {2, 3}, isr=[2, 3])
    assert (change.leader, change.isr) == (2, (2, 3))
    change = elect(reg([3, 1, 2], [1, 2, 3], 3), {1, 2}, isr=[1, 2])
    assert change.leader == 1  # assignment order, not ISR order


def test_no_clean_candidate_means_no_leader_unless_unclean_allowed() -> None:
    r = reg([1, 2, 3], [1], 1)
    assert elect(r, {2, 3}) == PartitionChange(topic_id="tid", partition=0, leader=NO_LEADER)
    change = elect(r, {2, 3}, unclean=True)
    assert (change.leader, change.isr) == (2, (2,))  # an unclean leader starts its own ISR


def test_preferred_election() -> None:
    assert elect(reg([1, 2], [1, 2], 2), {1, 2}, election=ElectionType.PREFERRED).leader == 1
    assert elect(reg([1, 2], [2], 2), {1, 2}, election=ElectionType.PREFERRED) is None  # 1 not in ISR


def cluster_of(*brokers: tuple[int, int, bool]) -> ClusterImage:
    """(broker id, broker epoch, fenced) registrations."""
    return ClusterImage({b: BrokerRegistration(b, f"inc-{b}", epoch, (), None, fenced)
                         for b, epoch, fenced in brokers})


def test_check_isr_change() -> None:
    r = reg([1, 2, 3], [1, 2], 1)
    cluster = cluster_of((1, 10, False), (2, 20, False), (3, 30, False))

    def isr(*members: int | tuple[int, int]) -> list[BrokerState]:
        return [BrokerState(*m) if isinstance(m, tuple) else BrokerState(m) for m in members]

    assert check_isr_change(r, isr(1, 2, (3, 30)), cluster) == (1, 2, 3)
    for bad in (isr(2, (3, 30)), isr(1, 4), isr(1, 1)):
        with pytest.raises(MetadataError) as e:
            check_isr_change(r, bad, cluster)
        assert e.value.error_code == "INVALID_REQUEST"
    # KIP-903: a joining member at another epoch than its registration's, or without one, or fenced
    for bad, fenced in ((isr(1, 2, (3, 29)), False), (isr(1, 2, 3), False), (isr(1, 2, (3, 30)), True)):
        with pytest.raises(MetadataError) as e:
            check_isr_change(r, bad, cluster_of((1, 10, False), (2, 20, False), (3, 30, fenced)))
        assert e.value.error_code == "INELIGIBLE_REPLICA"
    with pytest.raises(MetadataError) as e:  # a staying member named with a stale epoch
        check_isr_change(r, isr(1, (2, 19)), cluster)
    assert e.value.error_code == "INELIGIBLE_REPLICA"
    # staying members may be fenced (they leave by the controller's fencing) or named without an epoch
    assert check_isr_change(r, isr(1, 2), cluster_of((1, 10, False), (2, 20, True))) == (1, 2)


def test_fence_removes_from_isr_and_moves_leadership_then_unfence_elects() -> None:
    image = build(cluster_records([1, 2, 3]) + topic_records("t", "tid", [[1, 2, 3], [2, 3, 1]]) +
                  topic_records("solo", "sid", [[1]]))
    epoch = image.cluster.broker(1).broker_epoch
    changes = fence_broker_changes(image, 1, lambda t: False)
    by_topic = {(c.topic_id, c.partition): c for c in changes}
    assert by_topic[("tid", 0)].leader == 2 and by_topic[("tid", 0)].isr == (2, 3)
    assert by_topic[("tid", 1)].leader is None and by_topic[("tid", 1)].isr == (2, 3)
    assert by_topic[("sid", 0)].leader == NO_LEADER and by_topic[("sid", 0)].isr is None  # last ISR member stays
    stamp = [c.stamped(EPOCH, None) for c in changes]
    _, fenced = replay([FenceBroker(broker_id=1, broker_epoch=epoch, controller_epoch=EPOCH), *stamp], image)
    assert fenced.partition("solo", 0).leader == NO_LEADER and fenced.partition("solo", 0).isr == (1,)
    again = unfence_broker_changes(fenced, 1, lambda t: False)
    assert again == [PartitionChange(topic_id="sid", partition=0, leader=1)]
    _, back = replay([UnfenceBroker(broker_id=1, broker_epoch=epoch, controller_epoch=EPOCH),
                      *(c.stamped(EPOCH, None) for c in again)], fenced)
    assert back.partition("solo", 0).leader == 1 and back.partition("solo", 0).leader_epoch == 2


def test_preferred_leader_change_errors() -> None:
    image = build(cluster_records([1, 2]) + topic_records("t", "tid", [[1, 2]]))
    topic = image.topic_by_name("t")
    with pytest.raises(MetadataError) as e:
        preferred_leader_change(image, topic, 0)
    assert e.value.error_code == "ELECTION_NOT_NEEDED"
    _, moved = replay([PartitionChange(topic_id="tid", partition=0, leader=2, isr=(2,), controller_epoch=EPOCH)],
                      image)
    with pytest.raises(MetadataError) as e:
        preferred_leader_change(moved, moved.topic_by_name("t"), 0)
    assert e.value.error_code == "PREFERRED_LEADER_NOT_AVAILABLE"


brokers_ = st.lists(st.integers(0, 6), min_size=1, max_size=5, unique=True)


@given(brokers_.flatmap(lambda rs: st.tuples(
    st.just(rs), st.lists(st.sampled_from(rs), unique=True), st.sets(st.integers(0, 6)), st.booleans(),
    st.sampled_from(rs + [NO_LEADER]))))
def test_election_rules_hold_for_any_partition(args) -> None:
    replicas, isr, alive, unclean, leader = args
    if leader != NO_LEADER and leader not in isr:
        isr = isr + [leader]
    r = reg(replicas, isr, leader)
    change = elect(r, alive, unclean=unclean)
    after = r if change is None else r.merge(change)  # merge checks leader ∈ ISR ⊆ replicas
    clean = [b for b in replicas if b in isr and b in alive]
    if leader in clean:
        assert after.leader == leader
    elif clean:
        assert after.leader == clean[0]
    elif unclean and any(b in alive for b in replicas):
        assert after.leader == next(b for b in replicas if b in alive) and after.isr == (after.leader,)
    else:
        assert after.leader == NO_LEADER
    assert after.leader_epoch == r.leader_epoch + (after.leader != r.leader)

"""Partition reassignment rules (KIP-455): start, complete on AlterPartition, cancel, validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metadata_testing import EPOCH, build, cluster_records, replay, topic_records

from kraft.metadata.errors import MetadataError
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.metadata.partition_change import BrokerState, PartitionChangeBuilder, check_isr_change, reassignment_change

BROKERS = (1, 2, 3, 4)


def image_with(replicas: tuple[int, ...]) -> MetadataImage:
    return build([*cluster_records(BROKERS), *topic_records("t", "tid", [replicas])])


def reassign(image: MetadataImage, target) -> MetadataImage:
    change = reassignment_change(image, image.topic_by_name("t"), 0, target)
    return image if change is None else replay([change.stamped(EPOCH, None)], image)[1]


def join_isr(image: MetadataImage, isr) -> MetadataImage:
    """What the controller commits for a leader's AlterPartition."""
    reg = image.partition("t", 0)
    members = [BrokerState(b, image.cluster.broker(b).broker_epoch) for b in isr]
    new_isr = check_isr_change(reg, members, image.cluster)
    change = PartitionChangeBuilder("tid", 0, reg, image.cluster.is_unfenced).set_target_isr(new_isr).build()
    return image if change is None else replay([change.stamped(EPOCH, None)], image)[1]


def test_move_adds_then_completes_when_the_new_replicas_join_the_isr() -> None:
    image = reassign(image_with((1, 2)), [2, 3])
    reg = image.partition("t", 0)
    assert (reg.replicas, reg.adding_replicas, reg.removing_replicas) == ((2, 3, 1), (3,), (1,))
    assert (reg.isr, reg.leader) == ((1, 2), 1)  # nothing moves until 3 is in sync
    done = join_isr(image, [1, 2, 3]).partition("t", 0)
    assert (done.replicas, done.adding_replicas, done.removing_replicas) == ((2, 3), (), ())
    assert done.isr == (2, 3) and done.leader == 2  # the removed leader hands over to an in-sync one
    assert done.leader_epoch == reg.leader_epoch + 1


def test_shrinking_to_in_sync_replicas_completes_at_once() -> None:
    reg = reassign(image_with((1, 2, 3)), [3, 1]).partition("t", 0)
    assert (reg.replicas, reg.isr, reg.leader, reg.adding_replicas) == ((3, 1), (1, 3), 1, ())


def test_same_replicas_change_nothing() -> None:
    image = image_with((1, 2))
    assert reassignment_change(image, image.topic_by_name("t"), 0, [1, 2]) is None


def test_cancel_reverts_to_the_original_replicas() -> None:
    image = reassign(image_with((1, 2)), [3, 4])
    reverted = reassign(image, None).partition("t", 0)
    assert (reverted.replicas, reverted.isr, reverted.leader) == ((1, 2), (1, 2), 1)
    assert (reverted.adding_replicas, reverted.removing_replicas) == ((), ())


@pytest.mark.parametrize("target, error", [
    ([], "INVALID_REPLICA_ASSIGNMENT"),
    ([2, 2], "INVALID_REPLICA_ASSIGNMENT"),
    ([2, 9], "INVALID_REPLICA_ASSIGNMENT"),  # broker 9 is not registered
    (None, "NO_REASSIGNMENT_IN_PROGRESS"),
])
def test_bad_plans_are_refused(target, error) -> None:
    image = image_with((1, 2))
    with pytest.raises(MetadataError) as e:
        reassignment_change(image, image.topic_by_name("t"), 0, target)
    assert e.value.error_code == error


replica_sets = st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True).map(tuple)


@settings(max_examples=200, deadline=None)
@given(old=replica_sets, new=replica_sets, second=st.one_of(st.none(), replica_sets),
       joins=st.lists(st.sampled_from(BROKERS), max_size=6))
def test_reassignment_invariants(old, new, second, joins) -> None:
    """Any plan (and a second plan or a cancel over it) with followers catching up in any order:
    the leader stays in the ISR ⊆ replicas, adding/removing stay disjoint parts of the replicas,
    and once every target replica is in sync the partition holds exactly the target."""
    image = reassign(image_with(old), new)
    target = new
    if second is not None or image.partition("t", 0).adding_replicas:
        try:
            image = reassign(image, second)
            target = old if second is None else second
        except MetadataError as e:
            assert e.error_code == "NO_REASSIGNMENT_IN_PROGRESS" and second is None
    for b in [*joins, *target]:
        reg = image.partition("t", 0)
        if b in reg.replicas and b not in reg.isr and b not in reg.removing_replicas:
            image = join_isr(image, [*reg.isr, b])
        reg: PartitionRegistration = image.partition("t", 0)
        assert reg.leader in reg.isr and set(reg.isr) <= set(reg.replicas)
        assert not set(reg.adding_replicas) & set(reg.removing_replicas)
        assert set(reg.replicas) == set(target) | set(reg.removing_replicas)
    reg = image.partition("t", 0)
    assert set(reg.replicas) == set(target) and not reg.adding_replicas and not reg.removing_replicas
    assert reg.leader in target

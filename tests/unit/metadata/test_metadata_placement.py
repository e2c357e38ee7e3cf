"""Replica placement: Kafka's round-robin assignment, rack-aware when every broker has a rack."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.metadata.errors import MetadataError
from kraft.metadata.placement import BrokerPlacement, _rack_alternated, place_replicas


def brokers(n: int, racks: int | None = None) -> list[BrokerPlacement]:
    return [BrokerPlacement(i, None if racks is None else f"r{i % racks}") for i in range(n)]


def test_matches_kafkas_assignment_with_a_fixed_start() -> None:
    # AdminUtils.assignReplicasToBrokers(brokers 0..4, 10 partitions, rf 3, fixedStartIndex 0)
    assert place_replicas(10, 3, brokers(5), start_index=0, replica_shift=0) == [
        (0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1),
        (0, 2, 3), (1, 3, 4), (2, 4, 0), (3, 0, 1), (4, 1, 2),
    ]


def test_rack_alternated_list_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    arranged = _rack_alternated([BrokerPlacement(b, r) for b, r in racks.items()])
    assert [b.broker_id for b in arranged] == [0, 3, 1, 5, 4, 2]


def test_start_partition_continues_the_pattern() -> None:
    whole = place_replicas(8, 2, brokers(4), start_index=1, replica_shift=2)
    tail = place_replicas(5, 2, brokers(4), start_index=1, replica_shift=2, start_partition_id=3)
    assert tail[-5:] != [] and tail[0][0] == whole[3][0]


@pytest.mark.parametrize("partitions, rf, n, code", [
    (0, 1, 3, "INVALID_PARTITIONS"),
    (1, 0, 3, "INVALID_REPLICATION_FACTOR"),
    (1, 4, 3, "INVALID_REPLICATION_FACTOR"),
    (1, 1, 0, "INVALID_REPLICATION_FACTOR"),
])
def test_errors(partitions: int, rf: int, n: int, code: str) -> None:
    with pytest.raises(MetadataError) as e:
        place_replicas(partitions, rf, brokers(n), start_index=0, replica_shift=0)
    assert e.value.error_code == code


placements = st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.integers(1, n), st.integers(1, 60), st.integers(0, 100), st.integers(0, 100),
    st.one_of(st.none(), st.integers(1, n)),
))


@given(placements)
def test_placement_properties(args: tuple) -> None:
    n, rf, count, start, shift, racks = args
    bs = brokers(n, racks)
    result = place_replicas(count, rf, bs, start_index=start, replica_shift=shift)
    assert len(result) == count
    rack_of = {b.broker_id: b.rack for b in bs}
    for replicas in result:
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(rack_of)
        if racks is not None:  # a rack gets a second replica only when every rack has one
            assert len({rack_of[r] for r in replicas}) == min(rf, racks)
    leaders = Counter(r[0] for r in result)
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in rack_of) <= 1  # leaders spread evenly
    # deterministic for the same inputs
    assert place_replicas(count, rf, list(reversed(bs)), start_index=start, replica_shift=shift) == result

"""Kafka's murmur2 partitioner (bit-exact with the Java client) and the sticky partitioner."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.api.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest.testMurmur2: the Java client's own expectations.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key,expected", KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_to_positive_clears_the_sign_bit_like_kafka() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # Math.abs would overflow here; Kafka masks instead
    assert to_positive(5) == 5


def test_partition_for_key_is_kafkas_formula() -> None:
    assert partition_for_key(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=10_000))
def test_partition_in_range_and_deterministic(key: bytes, n: int) -> None:
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert p == partition_for_key(bytes(key), n)
    assert -(2**31) <= murmur2(key) < 2**31


def test_keys_spread_evenly() -> None:
    counts = Counter(partition_for_key(f"user-{i}".encode(), 10) for i in range(20_000))
    assert set(counts) == set(range(10))
    assert all(1_600 <= c <= 2_400 for c in counts.values()), counts


def test_sticky_stays_until_a_new_batch_then_moves_elsewhere() -> None:
    sticky = StickyPartitioner(random.Random(7).randrange)
    first = sticky.partition("t", 5)
    assert all(sticky.partition("t", 5) == first for _ in range(10))
    seen = {first}
    prev = first
    for _ in range(50):
        nxt = sticky.on_new_batch("t", 5, prev)
        assert nxt != prev and 0 <= nxt < 5
        assert sticky.partition("t", 5) == nxt
        seen.add(nxt)
        prev = nxt
    assert seen == set(range(5))


def test_sticky_single_partition_and_stale_switch() -> None:
    sticky = StickyPartitioner(random.Random(1).randrange)
    assert sticky.on_new_batch("one", 1, 0) == 0
    p = sticky.partition("t", 4)
    moved = sticky.on_new_batch("t", 4, p)
    # A second caller that still saw the old partition keeps the new choice.
    assert sticky.on_new_batch("t", 4, p) == moved

"""Kafka's coordinator partition formula: Java's String.hashCode and Utils.abs."""

from __future__ import annotations

from hypothesis import given, strategies as st

from kraft.broker.groups.hashing import coordinator_partition, java_string_hash_code


def test_java_hash_codes_match_the_jvm() -> None:
    # Values printed by OpenJDK 17 for s.hashCode()
    assert java_string_hash_code("") == 0
    assert java_string_hash_code("abc") == 96354
    assert java_string_hash_code("hello") == 99162322
    assert java_string_hash_code("console-consumer-12345") == 158455506
    assert java_string_hash_code("my-group") == -1906497762
    assert java_string_hash_code("\U0001F600") == 1772899  # a UTF-16 surrogate pair


def test_min_int_hash_maps_to_partition_zero() -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; Kafka's Utils.abs maps it to 0.
    assert java_string_hash_code("polygenelubricants") == -(2**31)
    assert coordinator_partition("polygenelubricants", 50) == 0


def test_known_group_partitions() -> None:
    # abs(hashCode) % 50 as computed by OpenJDK 17
    expected = {"abc": 4, "hello": 22, "console-consumer-12345": 6, "my-group": 12, "g1": 42,
                "\U0001F600": 49}
    assert {g: coordinator_partition(g, 50) for g in expected} == expected


@given(st.text(max_size=40), st.integers(1, 200))
def test_partition_is_in_range_and_stable(group_id: str, n: int) -> None:
    p = coordinator_partition(group_id, n)
    assert 0 <= p < n
    assert p == coordinator_partition(group_id, n)
    assert -(2**31) <= java_string_hash_code(group_id) < 2**31

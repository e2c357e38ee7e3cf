"""Which `__consumer_offsets` partition (and so which coordinator) owns a group: Kafka's formula
`Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` (pure)."""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"

_INT_MIN = -(2**31)


def java_string_hash_code(text: str) -> int:
    """Java's `String.hashCode()`: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a
    signed 32-bit int."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def java_abs(n: int) -> int:
    """Kafka's `Utils.abs`: Integer.MIN_VALUE maps to 0 (Math.abs would leave it negative)."""
    return 0 if n == _INT_MIN else abs(n)


def coordinator_partition(group_id: str, num_partitions: int) -> int:
    assert num_partitions > 0
    return java_abs(java_string_hash_code(group_id)) % num_partitions

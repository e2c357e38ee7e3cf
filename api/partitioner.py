"""Kafka's default partitioning, shared by the broker's JSON route and the Python producer (pure).

`murmur2` is a bit-exact port of Kafka's `Utils.murmur2` (Java `int` arithmetic, seed 0x9747b28c),
so a keyed record lands on the partition a Java producer would choose:
`to_positive(murmur2(key)) % num_partitions`. Keyless records use `StickyPartitioner` (KIP-480):
stay on one partition until its batch is closed, then move to another.
"""

from __future__ import annotations

import random
import struct
from typing import Callable

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: a signed 32-bit int, equal to what the Java client computes."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    n4 = length >> 2
    if n4:
        # Little-endian words, as Java assembles them byte by byte.
        for k in struct.unpack_from(f"<{n4}I", data):
            k = (k * _M) & _MASK32
            k ^= k >> 24
            k = (k * _M) & _MASK32
            h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's `Utils.toPositive`: clears the sign bit (not abs(), which differs for MIN_VALUE)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Per-topic sticky choice for keyless records (KIP-480).

    `partition(topic, n)` returns the current sticky partition; `on_new_batch(topic, n, prev)`
    moves to a different partition, called when the previous sticky batch was closed. The random
    source is injected so tests are deterministic.
    """

    def __init__(self, rand: Callable[[int], int] | None = None) -> None:
        self._rand = rand or random.Random().randrange
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self._rand(num_partitions)
            self._sticky[topic] = p
        return p

    def on_new_batch(self, topic: str, num_partitions: int, prev_partition: int) -> int:
        """Picks a partition other than `prev_partition` (when there is another) and sticks to it."""
        if self._sticky.get(topic, prev_partition) != prev_partition:
            # Another thread already moved on; keep its choice.
            return self._sticky[topic]
        if num_partitions <= 1:
            p = 0
        else:
            p = self._rand(num_partitions - 1)
            if p >= prev_partition:
                p += 1
        self._sticky[topic] = p
        return p

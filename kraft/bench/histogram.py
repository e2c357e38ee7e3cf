"""A latency histogram of every value (HdrHistogram's layout): microseconds below 2**SUB_BITS
counted exactly, larger values in 2**(SUB_BITS-1) buckets per power of two, so a percentile is
within 0.1 % of the value it stands for, whatever the range (1 µs to hours), in a few KB.

Percentiles are nearest-rank over the bucket counts and report the bucket's lowest value; `max`
and `min` are exact.
"""

from __future__ import annotations

from typing import Iterable

SUB_BITS = 11
_EXACT = 1 << SUB_BITS  # values below are their own bucket
_HALF = _EXACT >> 1


def bucket_of(value_us: int) -> int:
    if value_us < _EXACT:
        return value_us
    shift = value_us.bit_length() - SUB_BITS
    return (shift << (SUB_BITS - 1)) + (value_us >> shift)  # sub-bucket in [_HALF, _EXACT)


def bucket_floor(bucket: int) -> int:
    """The lowest value of a bucket."""
    if bucket < _EXACT:
        return bucket
    shift, sub = divmod(bucket - _HALF, _HALF)
    return (sub + _HALF) << shift


class LatencyHistogram:
    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self.count = 0
        self.sum_us = 0
        self.max_us = 0
        self.min_us = 0

    def record_us(self, value_us: int, n: int = 1) -> None:
        value_us = max(0, int(value_us))
        bucket = bucket_of(value_us)
        self._counts[bucket] = self._counts.get(bucket, 0) + n
        if not self.count or value_us < self.min_us:
            self.min_us = value_us
        self.count += n
        self.sum_us += value_us * n
        if value_us > self.max_us:
            self.max_us = value_us

    def record_ms(self, values_ms: Iterable[float]) -> None:
        for value in values_ms:
            self.record_us(round(value * 1000))

    @classmethod
    def of_ms(cls, values_ms: Iterable[float]) -> LatencyHistogram:
        hist = cls()
        hist.record_ms(values_ms)
        return hist

    def buckets(self) -> list[tuple[int, int]]:
        """(lowest value, count) of every bucket recorded, lowest first."""
        return [(min(bucket_floor(b), self.max_us), self._counts[b]) for b in sorted(self._counts)]

    def value_at_rank(self, rank: int) -> int:
        """The `rank`-th smallest value (1-based, clamped to [1, count]); the histogram is not empty."""
        seen = 0
        for value, count in self.buckets():
            seen += count
            if seen >= rank:
                return value
        return self.max_us

    def percentile_us(self, q: float) -> int | None:
        """Nearest rank (q in [0, 100]); None when empty."""
        if not self.count:
            return None
        return self.value_at_rank(int(max(1, -(-self.count * q // 100))))

    def percentile_ms(self, q: float) -> float | None:
        value = self.percentile_us(q)
        return None if value is None else value / 1000

    def summary_ms(self) -> dict[str, float | None]:
        """p50 / p99 / p99.9 / max in milliseconds (None when empty)."""
        out: dict[str, float | None] = {}
        for key, q in (("p50_ms", 50), ("p99_ms", 99), ("p999_ms", 99.9)):
            value = self.percentile_ms(q)
            out[key] = None if value is None else round(value, 3)
        out["max_ms"] = round(self.max_us / 1000, 3) if self.count else None
        return out

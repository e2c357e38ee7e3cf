"""Partition offsets as Spark's Kafka source writes them, and the pure planning on top (no I/O).

Offsets travel as Kafka's JSON `{"topic": {"0": 42}}`, canonical (topics sorted, partitions sorted
numerically, string keys) because Spark compares offsets by their JSON text. In specs given by the
user, -2 means earliest and -1 latest. Also here: the `maxOffsetsPerTrigger` rate limit (Kafka's
`KafkaMicroBatchStream.rateLimit`) and the split of offset ranges into input partitions
(`minPartitions`, Kafka's `KafkaOffsetRangeCalculator`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from kraft.api.errors import KraftError

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]

EARLIEST = -2
LATEST = -1


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The canonical JSON-able form: topics sorted, partitions sorted numerically."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def to_json_text(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(to_json(offsets), separators=(",", ":"))


def from_json(value: Any, what: str = "offsets") -> PartitionOffsets:
    """Parses `{"topic": {"0": 42}}` (a dict, or its JSON text) into `{(topic, 0): 42}`."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise KraftError(
                "INVALID_CONFIG",
                f"{what} is not valid JSON ({e.msg} at column {e.colno}): {value!r}; "
                'expected {"topic":{"0":23,"1":-2}}',
            ) from None
    if not isinstance(value, dict):
        raise KraftError("INVALID_CONFIG", f'{what} must be a JSON object like {{"topic":{{"0":23}}}}, got {value!r}')
    out: PartitionOffsets = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not topic:
            raise KraftError(
                "INVALID_CONFIG", f'{what}: topic {topic!r} must map to {{"partition": offset}}, got {partitions!r}'
            )
        for partition, offset in partitions.items():
            try:
                p = int(partition)
            except (TypeError, ValueError):
                p = -1
            if p < 0 or isinstance(offset, bool) or not isinstance(offset, int):
                raise KraftError(
                    "INVALID_CONFIG",
                    f"{what}: {topic}[{partition!r}] = {offset!r}; partitions are non-negative "
                    "integers and offsets integers",
                )
            out[(topic, p)] = offset
    return out


def parse_assign(text: str) -> list[TopicPartition]:
    """The `assign` option: `{"topicA":[0,1],"topicB":[2,4]}`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise KraftError("INVALID_CONFIG", f'assign is not valid JSON ({e.msg}): {text!r}; expected {{"topicA":[0,1]}}') from None
    if not isinstance(value, dict) or not value:
        raise KraftError("INVALID_CONFIG", f'assign must be a non-empty JSON object like {{"topicA":[0,1]}}, got {text!r}')
    out: list[TopicPartition] = []
    for topic, partitions in value.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise KraftError("INVALID_CONFIG", f"assign: topic {topic!r} must map to a list of partition numbers, got {partitions!r}")
        out.extend((topic, p) for p in partitions)
    return sorted(set(out))


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> PartitionOffsets:
    """End offsets reading at most about `limit` records past `start`, prorated by each partition's
    backlog (Kafka's rule: small partitions round up so they are never starved, others down).

    `start` must hold every partition of `latest`. The result lies in [start, latest] per partition.
    """
    assert limit > 0, "maxOffsetsPerTrigger must be positive"
    sizes = {tp: end - start[tp] for tp, end in latest.items() if end - start[tp] > 0}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        prorate = limit * (size / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, start[tp] + step)
    return out


@dataclass(frozen=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one topic-partition: one Spark input partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def plan_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], min_partitions: int | None = None
) -> list[OffsetRange]:
    """One range per topic-partition with records between `start` and `end`; when `min_partitions`
    asks for more, big ranges are cut in pieces proportional to their size (as Kafka's source does).
    Every offset of every non-empty range is covered exactly once."""
    ranges = [
        OffsetRange(tp[0], tp[1], start[tp], end[tp])
        for tp in sorted(end)
        if tp in start and end[tp] > start[tp]
    ]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size / total * min_partitions)))
        bounds = [r.from_offset + r.size * i // parts for i in range(parts + 1)]
        out.extend(
            OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo
        )
    return out

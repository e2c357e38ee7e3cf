"""Shared by the transaction tests: batches stamped as a log would hold them (one after another
from offset 0), and what they read back from real nodes (every record a read_committed consumer
sees, a group's committed offset)."""

from __future__ import annotations

from kraft.api.client import Consumer, TopicPartition
from kraft.log.batch import BatchHeader, stamp


def stamped(batches: list[bytes]) -> bytes:
    """`batches` with consecutive offsets from 0, concatenated."""
    out, offset = bytearray(), 0
    for batch in batches:
        buf = bytearray(batch)
        stamp(buf, 0, offset, 0)
        offset = BatchHeader.parse(buf).next_offset
        out += buf
    return bytes(out)


def committed_values(bootstrap: str | list[str], topic: str, partitions: int | list[int]) -> list[str]:
    """Every value a read_committed consumer reads from `topic` (its first `partitions`, or those
    listed), to each partition's last stable offset, sorted."""
    consumer = Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in (range(partitions) if isinstance(partitions, int) else partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)  # read_committed: the LSO
        values: list[str] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(1000).values():
                values += [r.value.decode() for r in records]
        return sorted(values)
    finally:
        consumer.close(autocommit=False)


def group_offset(bootstrap: str | list[str], group: str, topic: str) -> int | None:
    """The offset `group` committed for `topic`-0 (None: none)."""
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close(autocommit=False)


def stable(bootstrap: str | list[str], topic: str, partitions: int) -> bool:
    """No transaction is open in `topic`: every partition's last stable offset is its high
    watermark (what read_committed and read_uncommitted consumers take as the end agree)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
        try:
            ends.append(consumer.end_offsets(tps))
        finally:
            consumer.close(autocommit=False)
    return ends[0] == ends[1]

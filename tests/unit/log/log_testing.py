"""Helpers shared by the storage-engine tests (imported by the test modules of this folder)."""

from __future__ import annotations

from kraft.log import kafka_batch
from kraft.log.batch import Record, build_batch, iter_batches
from kraft.log.records import decode_records


def make_batch(
    n: int = 1,
    *,
    ts: int = 1_000,
    key: bytes | None = b"k",
    size: int = 10,
    compression: str = "none",
    v2: bool = False,
) -> bytes:
    """A producer batch of `n` records with timestamps ts, ts+1, ...: kraft's, or with `v2` a
    Kafka producer's RecordBatch v2."""
    return (kafka_batch.build_batch if v2 else build_batch)(
        [(key, bytes([i % 256]) * size, None, ts + i) for i in range(n)], compression=compression
    )


def all_records(data: bytes) -> list[Record]:
    """Every record of concatenated batches (either format)."""
    return [r for pos, _ in iter_batches(data) for r in decode_records(data, pos)]

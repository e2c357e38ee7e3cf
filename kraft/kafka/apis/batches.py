"""Stored batches for Kafka clients (RecordBatch v2, magic 2). The log keeps a producer's v2
batches as sent beside kraft's own (log/records.py), so a fetch serves each stored v2 batch as it
is and converts only a kraft batch, one written over HTTP (`to_client`, the same header fields,
offsets and codec: log/kafka_batch.py).

Converting decodes and re-encodes every record (about 15 ms a MiB, more with compression), so
`to_client_all` runs a fetch answer's conversions in a thread once the kraft batches to convert
reach INLINE_BYTES: a fetch answer of fetch.max.bytes of HTTP-written batches held the event loop
for seconds. An answer of v2 batches only has nothing to convert, whatever its size: the header
scan that finds that out runs on the loop (a few µs a batch), and the thread hop is skipped."""

from __future__ import annotations

import asyncio
from typing import Callable, Sequence, TypeVar

from kraft.log import kafka_batch
from kraft.log.batch import MAGIC_V2, BatchHeader, iter_batches

INLINE_BYTES = 1 << 20  # below it a conversion costs less than a thread hop
T = TypeVar("T")
Batches = list[tuple[int, BatchHeader]]


def to_client(stored: bytes | memoryview) -> bytes | memoryview:
    """The stored whole batches as v2 batches (a cut trailing batch is left out): the stored
    bytes themselves (a view, not a copy) when every batch is v2 already."""
    return _to_client(stored, list(iter_batches(stored)))


def _to_client(stored: bytes | memoryview, batches: Batches) -> bytes | memoryview:
    end = batches[-1][0] + batches[-1][1].size_in_bytes if batches else 0
    if all(header.magic == MAGIC_V2 for _, header in batches):
        return stored if end == len(stored) else memoryview(stored)[:end]
    out = bytearray()
    for pos, header in batches:
        if header.magic == MAGIC_V2:
            out += memoryview(stored)[pos:pos + header.size_in_bytes]
        else:
            out += kafka_batch.from_kraft(stored, pos)
    return bytes(out)


async def to_client_all(stored: Sequence[bytes | memoryview]) -> list[bytes | memoryview]:
    """`to_client` of each partition's stored batches."""
    scanned = [list(iter_batches(s)) for s in stored]
    converting = sum(h.size_in_bytes for batches in scanned for _, h in batches if h.magic != MAGIC_V2)
    return await _off_loop(lambda: [_to_client(s, b) for s, b in zip(stored, scanned)], converting)


async def _off_loop(work: Callable[[], T], size: int) -> T:
    return work() if size < INLINE_BYTES else await asyncio.to_thread(work)

"""Record batches between Kafka clients (RecordBatch v2, magic 2) and the log, which stores
kraft's batches (log/batch.py): a producer's v2 batches are checked (framing, magic, CRC) and
converted to kraft's at append (`to_log`), a consumer gets each stored batch as v2 (`to_client`,
the same header fields, offsets and codec: log/kafka_batch.py). Storing v2 batches as sent needs
the log to take magic 2 (docs/kafka-protocol.md, "Differences from Kafka").

Converting decodes and re-encodes every record (about 15 ms a MiB, more with compression), so
`to_log_all` / `to_client_all` run a request's conversions in a thread past INLINE_BYTES: a
100 MiB produce, or a fetch answer of fetch.max.bytes, held the event loop for seconds."""

from __future__ import annotations

import asyncio
from typing import Callable, Sequence, TypeVar

from kraft.errors import KraftError
from kraft.log import kafka_batch
from kraft.log.batch import iter_batches
from kraft.log.errors import LogError

MAGIC_V2 = 2
INLINE_BYTES = 1 << 20  # below it a conversion costs less than a thread hop
T = TypeVar("T")


def to_log(records: bytes | None) -> bytes:
    """A producer's v2 batches as kraft batches; INVALID_RECORD / CORRUPT_MESSAGE when one does not
    check out (nothing of the partition's is appended)."""
    if not records:
        raise KraftError("INVALID_RECORD", "no record batch")
    out, pos = bytearray(), 0
    try:
        while pos < len(records):
            header = kafka_batch.validate_framing(records, pos)
            out += kafka_batch.to_kraft(records, pos)
            pos += header.size_in_bytes
    except LogError as e:
        raise KraftError(e.error_code, str(e)) from None
    return bytes(out)


def to_client(stored: bytes) -> bytes:
    """The stored whole batches as v2 batches (a cut trailing batch is left out)."""
    out = bytearray()
    for pos, header in iter_batches(stored):
        if header.magic == MAGIC_V2:
            out += stored[pos:pos + header.size_in_bytes]
        else:
            out += kafka_batch.from_kraft(stored, pos)
    return bytes(out)


async def to_log_all(records: Sequence[bytes | None]) -> list[bytes | KraftError]:
    """`to_log` of each partition's records: the kraft batches, or that partition's error."""
    def convert() -> list[bytes | KraftError]:
        out: list[bytes | KraftError] = []
        for r in records:
            try:
                out.append(to_log(r))
            except KraftError as e:
                out.append(e)
        return out
    return await _off_loop(convert, sum(len(r or b"") for r in records))


async def to_client_all(stored: Sequence[bytes]) -> list[bytes]:
    """`to_client` of each partition's stored batches."""
    return await _off_loop(lambda: [to_client(s) for s in stored], sum(len(s) for s in stored))


async def _off_loop(work: Callable[[], T], size: int) -> T:
    return work() if size < INLINE_BYTES else await asyncio.to_thread(work)

"""The hot path's copies in the log (counted with tracemalloc): a producer's batches given in a
writable buffer (the request body) are validated, stamped and written in place, and a read is
one buffer that the served batches are a view of (docs/benchmarks.md, the 1 KiB path)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from kraft.log.batch import build_batch, iter_batches
from kraft.log.config import LogConfig
from kraft.log.partition_log import PartitionLog

MIB = 1 << 20


def _batches(count: int, records: int = 100, size: int = 1024) -> bytes:
    return b"".join(build_batch([(None, bytes([i % 256]) * size, (), 1_700_000_000_000)] * records)
                    for i in range(count))


def _peak(call) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_producers_writable_buffer_is_stamped_and_written_without_a_copy(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    try:
        body = bytearray(_batches(40))  # ~4 MiB, as a request body gathered into one buffer
        info, peak = _peak(lambda: plog.append_as_leader(memoryview(body), 3, 1_700_000_000_000))
        assert info.first_offset == 0 and info.last_offset == 3999
        assert peak < len(body) // 4, f"{peak} bytes allocated appending {len(body)}: a copy"
        assert body[:8] == bytes(8)  # offset 0 stamped in place
        positions = [pos for pos, _ in iter_batches(body)]
        assert int.from_bytes(body[positions[1]:positions[1] + 8], "big") == 100
        plog.flush()
        assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == bytes(body)
        immutable = _batches(1)  # bytes cannot be stamped in place: copied once
        before = bytes(immutable)
        plog.append_as_leader(immutable, 3, 1_700_000_000_000)
        assert immutable == before
    finally:
        plog.close()


def test_a_read_serves_its_batches_from_the_one_buffer_it_read(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    try:
        data = _batches(40)
        plog.append_as_leader(data, 0, 1_700_000_000_000)
        plog.flush()
        stored = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
        limit = 2 * MIB + 1000  # not a batch boundary: the read is cut to whole batches
        info, peak = _peak(lambda: plog.read(0, limit))
        assert len(info.records) < limit and bytes(info.records) == stored[:len(info.records)]
        assert peak < 1.5 * limit, f"{peak} bytes allocated reading {limit}: a copy of the batches"
    finally:
        plog.close()

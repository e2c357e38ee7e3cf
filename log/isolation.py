"""What a reader sees of fetched batches, by isolation level (pure; Kafka's consumer-side rule of
`CompletedFetch` for READ_COMMITTED).

A fetch answers raw batches. Control batches (transaction markers, `log/control.py`) never reach an
application. A read_committed fetch stops at the last stable offset and also answers the aborted
transactions its batches overlap, as (producer id, first offset) pairs; walking the batches in
order, a producer joins the aborted set once a batch reaches its aborted transaction's first
offset, its transactional batches are dropped while it is in the set, and its ABORT marker takes
it out again (its next transaction may commit). Non-transactional batches are always seen.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from kraft.log.batch import BatchHeader, iter_batches
from kraft.log.control import ABORT, read_marker


def readable_batches(
    data: bytes | bytearray | memoryview, aborted: Iterable[tuple[int, int]] | None = None,
) -> Iterator[tuple[int, BatchHeader, bool]]:
    """(position, header, visible) for every complete batch of `data`, in order; `visible` is
    whether an application reads its records: never a control batch, and with `aborted`
    (read_committed: the fetch's aborted transactions) no batch of an aborted transaction.
    Readers move their position past every batch, visible or not."""
    pending = sorted(aborted or (), key=lambda t: t[1])  # (producer id, first offset)
    next_aborted = 0
    aborted_producers: set[int] = set()
    for pos, header in iter_batches(data):
        if aborted is not None and header.producer_id >= 0:
            while next_aborted < len(pending) and pending[next_aborted][1] <= header.last_offset:
                aborted_producers.add(pending[next_aborted][0])
                next_aborted += 1
            if header.is_control:
                marker = read_marker(data, pos)
                if marker is not None and marker.control_type == ABORT:
                    aborted_producers.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborted_producers:
                yield pos, header, False
                continue
        yield pos, header, not header.is_control

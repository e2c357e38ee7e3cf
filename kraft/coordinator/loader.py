"""Loading a coordinator partition (Kafka's `CoordinatorLoaderImpl`): its records from the log
start to the log end as this broker took over, replayed in offset order into a fresh shard.

Only records below the high watermark are trusted: the tail a previous leader wrote counts once
the ISR has it, so the load waits for the high watermark (an event of the replica, not a poll)
until it passes the log end it started from. Reads are whole batches of `chunk_bytes`; every
`slice_records` replayed records the loop gets a turn. A partition not readable yet (its role
being applied, its log offline) is asked again after `retry_ms`. A cancelled load leaves nothing
behind but the discarded shard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

from kraft.errors import KraftError
from kraft.server.records import FetchPartitionResult
from kraft.coordinator.partition_writer import PartitionWriter
from kraft.coordinator.result import CoordinatorRecord, CoordinatorShard
from kraft.log.batch import iter_batches
from kraft.log.records import decode_records
from kraft.log.control import read_marker

log = logging.getLogger("kraft.coordinator")

T = TypeVar("T")


@dataclass(frozen=True)
class LoaderSettings:
    chunk_bytes: int = 1 << 20
    slice_records: int = 1000
    wait_ms: int = 30_000  # one read waits this long for the high watermark, then reads again
    retry_ms: int = 100


@dataclass(frozen=True)
class LoadSummary:
    next_offset: int  # the offset the shard's next write must get
    records: int
    seconds: float


async def load(writer: PartitionWriter, topic: str, partition: int, shard: CoordinatorShard,
               settings: LoaderSettings) -> LoadSummary:
    """Replays the partition into `shard`: records (with their producer when transactional) and
    transaction markers, in offset order."""
    started = time.monotonic()
    offsets = await _readable(topic, partition, settings, lambda: writer.offsets(topic, partition))
    position, target, count = offsets.log_start_offset, offsets.log_end_offset, 0
    while position < target:
        info = await _readable(topic, partition, settings,
                               lambda: _read(writer, topic, partition, position, settings))
        for pos, header in iter_batches(info.records):
            if header.next_offset > info.high_watermark:  # reads below the HW are whole batches
                raise KraftError("UNKNOWN_SERVER_ERROR", f"{topic}-{partition}: a read below the high "
                                 f"watermark {info.high_watermark} returned offsets up to {header.next_offset}")
            if header.is_control:
                marker = read_marker(info.records, pos)
                if marker is not None and header.base_offset >= position:
                    shard.replay_end_transaction(header.producer_id, marker.is_commit)
                position = header.next_offset
                continue
            producer_id = header.producer_id if header.is_transactional else -1
            for record in decode_records(info.records, pos):
                if record.offset >= position:  # the log start may be inside the first batch
                    shard.replay(CoordinatorRecord(record.offset, record.key, record.value, producer_id))
                    count += 1
                    if count % settings.slice_records == 0:
                        await asyncio.sleep(0)
            position = header.next_offset
    return LoadSummary(position, count, time.monotonic() - started)


async def _read(writer: PartitionWriter, topic: str, partition: int, offset: int,
                settings: LoaderSettings) -> FetchPartitionResult:
    info = await writer.read_committed(topic, partition, offset, settings.chunk_bytes, settings.wait_ms)
    if info.error_code is not None:
        raise KraftError(info.error_code, info.message or "")
    return info


async def _readable(topic: str, partition: int, settings: LoaderSettings,
                    read: Callable[[], Awaitable[T]]) -> T:
    """`read()`, asked again while it answers a retriable error (the partition's log still
    opening, its role not applied yet, offline on a storage error); the load is cancelled when
    leadership moves."""
    waiting = None
    while True:
        try:
            return await read()
        except KraftError as e:
            if not e.retriable:
                raise
            if waiting != e.error_code:
                waiting = e.error_code
                log.info("loading %s-%d waits: %s", topic, partition, e)
        await asyncio.sleep(settings.retry_ms / 1000)

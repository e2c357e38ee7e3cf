"""MetadataLoader: committed records → MetadataDelta → new image → publishers (Kafka's `MetadataLoader`).

Controllers feed it from their quorum (`attach(quorum)`: one committed batch at a time, and
snapshots); brokers feed it what they fetch from the active controller (`replay(entries)`,
`install_snapshot(parse)`). Input is queued in log order and applied by one task on the loop in
bounded slices (at most `slice_records` records or `slice_seconds` of work, then
`asyncio.sleep(0)`), so a 20k-record batch or a 100k-partition snapshot never holds the loop for
longer than one slice.

Publishing is at batch boundaries, as Kafka's loader does: a batch is the records of one request
(one Raft entry; on a broker one fetched answer, which the controller cuts at its batches' ends),
and no publisher, reader of `image` or waiter ever sees part of one. Consecutive batches are folded into one delta (one image) until the queue is empty or the
delta holds `publish_records` records. Each applied delta goes to every publisher's
`on_metadata_update(delta, image)` (a publisher that raises is logged and skipped); a snapshot is
published whole, as the delta from the previous image. A snapshot's parse (`MetadataImage`
construction, msgpack decoding) runs in a thread first (`install_snapshot(parse)`, or a quorum's
snapshot handed over as a function).

Offsets: `offset` is the last record handed in, `retained_offset` the last one `read` can serve,
`image.offset` the last one published. `image` is the last published image and never waits;
whoever needs its own write applied awaits `wait_for_offset`. Without a running loop (a plain
caller), input is applied at once; `image_now()` drains the queue synchronously.

For serving brokers (`read`, long poll `wait_for_records`), it keeps a bounded tail of recent
records msgpack-encoded as they are replayed, with the ends of their batches: an answer holds whole
batches only, is a slice of bytes (`read_encoded`) or decoded once for every broker asking the same
range (`read`), and the tail holds no objects for the garbage collector to walk. Older offsets
raise `SnapshotNeededError`. A broker keeps no tail (`max_retained_records=0`).

On a controller the image is built here (the Raft thread only keeps the entries,
`raft_state.PendingImage`): each image published is handed back to the quorum (`image_folded`) so
its snapshots need no refold.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol, Union

import msgpack

from kraft.controller.heap import gc_paused
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import MetadataImage

log = logging.getLogger(__name__)

Entries = list[tuple[int, dict[str, Any]]]
SLICE_RECORDS = 500
SLICE_SECONDS = 0.005
PUBLISH_RECORDS = 1_000
TAIL_CHUNK_RECORDS = 1_024


class MetadataPublisher(Protocol):
    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None: ...


class SnapshotNeededError(Exception):
    """The records asked for are gone from the tail: load the image (a snapshot) first."""

    error_code = "OFFSET_OUT_OF_RANGE"

    def __init__(self, from_offset: int, first_available: int) -> None:
        super().__init__(f"metadata offset {from_offset} is older than the retained log ({first_available}): "
                         "load a snapshot")
        self.from_offset = from_offset
        self.first_available = first_available


@dataclass(frozen=True)
class EncodedRecords:
    """`count` committed records as msgpack: `data` is the concatenation of one `[offset, record]`
    array per record, i.e. the body of a msgpack array of `count` elements."""

    count: int
    data: bytes

    EMPTY: ClassVar["EncodedRecords"]

    def packed(self) -> bytes:
        """The records as one msgpack array."""
        return _array_header(self.count) + self.data

    def decode(self) -> list[list[Any]]:
        """`[[offset, record], ...]` (what the JSON form of an answer carries)."""
        with gc_paused():
            return msgpack.unpackb(self.packed(), raw=False, strict_map_key=False)


EncodedRecords.EMPTY = EncodedRecords(0, b"")


def _array_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


class _RecordTail:
    """The last `limit` records, msgpack-encoded in chunks, and where the batches they came in
    end: `read` serves whole batches only (a broker never applies part of one). Offsets are
    consecutive between two resets, as the metadata log's are."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # whole chunks are dropped: a small limit gets small chunks, so it keeps about `limit`
        self.chunk_records = max(1, min(TAIL_CHUNK_RECORDS, limit // 4))
        self._packer = msgpack.Packer(use_bin_type=True)
        self._firsts: list[int] = []  # first offset of each chunk
        self._ends: list[array] = []  # per chunk: where each record's bytes end
        self._data: list[bytearray] = []
        self._batch_ends: list[int] = []  # offset of the last record of each retained batch
        self._count = 0
        self.first_available = 0  # the oldest offset `read` can serve
        self.last_offset = -1  # the last record appended
        self.servable_offset = -1  # the end of the last whole batch appended
        self.generation = 0  # bumped by every reset

    def reset(self, next_offset: int) -> None:
        self.generation += 1
        for kept in (self._firsts, self._ends, self._data, self._batch_ends):
            kept.clear()
        self._count = 0
        self.first_available = next_offset
        self.last_offset = self.servable_offset = next_offset - 1

    def append(self, offset: int, record: dict[str, Any]) -> None:
        assert offset == self.last_offset + 1 or self.last_offset < 0, (offset, self.last_offset)
        self.last_offset = offset
        if self.limit <= 0:
            self.first_available = offset + 1
            return
        if not self._data or len(self._ends[-1]) >= self.chunk_records:
            self._firsts.append(offset)
            self._ends.append(array("Q"))
            self._data.append(bytearray())
        data = self._data[-1]
        data += self._packer.pack([offset, record])
        self._ends[-1].append(len(data))
        self._count += 1
        if self._count - len(self._ends[0]) >= self.limit and len(self._data) > 1:
            self._count -= len(self._ends[0])  # drop the oldest chunk: the rest still holds `limit`
            for chunks in (self._firsts, self._ends, self._data):
                del chunks[0]
            self.first_available = self._firsts[0]
            del self._batch_ends[:bisect.bisect_left(self._batch_ends, self.first_available)]

    def end_batch(self) -> None:
        """The records appended so far end a batch: they can be served."""
        if self.servable_offset < self.last_offset:
            self.servable_offset = self.last_offset
            if self.limit > 0:
                self._batch_ends.append(self.last_offset)

    def read(self, from_offset: int, max_records: int) -> EncodedRecords:
        """Whole batches from `from_offset` on: as many as fit in `max_records`, or the first
        one alone when it is larger."""
        if from_offset > self.servable_offset:
            return EncodedRecords.EMPTY
        if from_offset < self.first_available:
            raise SnapshotNeededError(from_offset, self.first_available)
        ends = self._batch_ends
        fits = bisect.bisect_right(ends, min(from_offset + max_records - 1, self.servable_offset)) - 1
        last = ends[fits] if fits >= 0 and ends[fits] >= from_offset else ends[bisect.bisect_left(ends, from_offset)]
        parts: list[bytes] = []
        chunk = bisect.bisect_right(self._firsts, from_offset) - 1
        offset = from_offset
        while offset <= last:
            first, ends_in_chunk = self._firsts[chunk], self._ends[chunk]
            index, stop = offset - first, min(len(ends_in_chunk), last - first + 1)
            start = ends_in_chunk[index - 1] if index > 0 else 0
            parts.append(bytes(memoryview(self._data[chunk])[start:ends_in_chunk[stop - 1]]))
            offset, chunk = first + stop, chunk + 1
        return EncodedRecords(last - from_offset + 1, b"".join(parts))


@dataclass(eq=False)
class _Batch:
    entries: Entries
    position: int = 0  # records replayed so far


@dataclass(eq=False)
class _Snapshot:
    parse: Callable[[], MetadataImage]
    image: MetadataImage | None = None  # once parsed
    installed: asyncio.Future[None] | None = None  # for whoever waits on it


_Work = Union[_Batch, _Snapshot]


class MetadataLoader:
    def __init__(self, *, max_retained_records: int = 100_000, slice_records: int = SLICE_RECORDS,
                 slice_seconds: float = SLICE_SECONDS, publish_records: int = PUBLISH_RECORDS) -> None:
        assert max_retained_records >= 0 and slice_records > 0 and slice_seconds > 0 and publish_records > 0
        self.max_retained_records = max_retained_records
        self.slice_records = slice_records
        self.slice_seconds = slice_seconds
        self.publish_records = publish_records
        self._image = MetadataImage.EMPTY
        self._delta: MetadataDelta | None = None  # whole batches replayed, not published yet
        self._delta_records = 0
        self._queue: deque[_Work] = deque()
        self._open: Entries = []  # records handed in one by one, closed into a batch at the next loop turn
        self._offset = -1  # the last offset handed in
        self._task: asyncio.Task[None] | None = None
        self._publishers: list[MetadataPublisher] = []
        self._tail = _RecordTail(max_retained_records)
        self._image_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._record_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._image_listeners: list[Callable[[MetadataImage], None]] = []
        self._last_read: tuple[tuple[int, int, int], list[list[Any]]] | None = None
        self.slices = 0  # replay slices that ended with a yield to the loop (how often it let go)

    @property
    def image(self) -> MetadataImage:
        """The last published image (whole batches only); never waits."""
        if self._pending() and not _loop_running():
            self._drain()
        return self._image

    def image_now(self) -> MetadataImage:
        """The image after every record handed in so far: applies the queue at once, without
        yielding (for the rare caller that cannot wait, e.g. a snapshot taken at a given offset)."""
        self._drain()
        return self._image

    @property
    def offset(self) -> int:
        """The last offset handed in (applied or queued)."""
        return self._offset

    @property
    def retained_offset(self) -> int:
        """The end of the last whole batch replayed (readable by `read` while the tail holds it)."""
        return self._tail.servable_offset

    def attach(self, quorum: Any) -> None:
        """Follow a quorum: apply its commits and snapshots (and be its snapshot source if it takes one)."""
        if hasattr(quorum, "on_commit_batch"):
            quorum.on_commit_batch(self.handle_batch)
        else:
            quorum.on_commit(self.handle_commit)
        quorum.on_snapshot(self.handle_snapshot)
        if hasattr(quorum, "set_snapshot_source"):
            quorum.set_snapshot_source(self.image_now)
        if hasattr(quorum, "image_folded"):
            self.on_image(quorum.image_folded)

    def on_image(self, listener: Callable[[MetadataImage], None]) -> None:
        """`listener(image)` with every published image, before the publishers."""
        self._image_listeners.append(listener)

    def install_publisher(self, publisher: MetadataPublisher) -> None:
        """Add a publisher; it gets the current image at once (as a snapshot delta) if there is one."""
        image = self._image
        self._publishers.append(publisher)
        if image.offset >= 0:
            self._publish_to(publisher, MetadataDelta.from_snapshot(MetadataImage.EMPTY, image), image)

    def remove_publisher(self, publisher: MetadataPublisher) -> None:
        self._publishers.remove(publisher)

    # -- input ------------------------------------------------------------------------------------

    def handle_batch(self, entries: Entries) -> None:
        """One committed batch (quorum callback), applied as a whole."""
        self._close_open()
        self._enqueue(entries)

    def handle_commit(self, offset: int, record: dict[str, Any]) -> None:
        """One committed record (for a quorum that hands them one by one): the records handed in
        during one loop turn form one batch."""
        if offset <= self._offset:
            return  # redelivered
        self._offset = offset
        self._open.append((offset, record))
        if len(self._open) == 1:
            try:
                asyncio.get_running_loop().call_soon(self._close_open)
            except RuntimeError:  # no loop (a plain caller): apply at once
                self._close_open()

    def handle_snapshot(self, offset: int, state: Any) -> None:
        """Quorum callback: the state at `offset` replaced everything. `state` is the image, or
        a pure function building it (run in a thread)."""
        if callable(state) and not isinstance(state, MetadataImage):
            self._enqueue_snapshot(_Snapshot(_checked(state, offset)))
        elif isinstance(state, MetadataImage) and state.offset == offset:
            self._enqueue_snapshot(_Snapshot(lambda: state, state))
        else:
            log.error("snapshot at offset %d carries no metadata image (%s); ignored", offset, type(state).__name__)
            return
        self._offset = max(self._offset, offset)

    def apply_batch(self, entries: Entries) -> MetadataImage:
        """Replay committed (offset, record) entries and publish them now (synchronous)."""
        self._close_open()
        self._enqueue(entries, start=False)
        return self.image_now()

    async def replay(self, entries: Entries) -> MetadataImage:
        """Replay committed entries in slices; returns once they are published."""
        self._close_open()
        last = self._enqueue(entries)
        if last is not None:
            await self.wait_for_offset(last, None)
        return self._image

    def load_snapshot(self, image: MetadataImage) -> MetadataImage:
        """Replace the state with a whole image now (synchronous); publishes the difference."""
        self._close_open()
        self._enqueue_snapshot(_Snapshot(lambda: image, image), start=False)
        return self.image_now()

    async def install_snapshot(self, parse: Callable[[], MetadataImage]) -> MetadataImage:
        """Replace the state with the image `parse()` builds (in a thread: it must be pure)."""
        self._close_open()
        work = _Snapshot(parse, installed=asyncio.get_running_loop().create_future())
        self._enqueue_snapshot(work)
        assert work.installed is not None
        await asyncio.shield(work.installed)
        assert work.image is not None
        return work.image

    # -- serving brokers --------------------------------------------------------------------------

    def read_encoded(self, from_offset: int, max_records: int = 1000) -> EncodedRecords:
        """Replayed records from `from_offset` on, msgpack-encoded: whole batches, as many as fit
        in `max_records` (or the first one alone when it is larger); empty when none yet;
        `SnapshotNeededError` when no longer retained."""
        return self._tail.read(from_offset, max(1, max_records))

    def read(self, from_offset: int, max_records: int = 1000) -> list[list[Any]]:
        """Like `read_encoded`, decoded: `[offset, record]` pairs (shared with the next caller
        asking for the same records, as every broker does after a commit: do not modify)."""
        encoded = self.read_encoded(from_offset, max_records)
        key = (self._tail.generation, from_offset, encoded.count)
        if self._last_read is None or self._last_read[0] != key:
            self._last_read = (key, encoded.decode())
        return self._last_read[1]

    async def wait_for_records(self, offset: int, timeout_s: float) -> bool:
        """Wait until `read` can serve `offset` (long poll); False on timeout."""
        return await self._wait(self._record_waiters, offset, timeout_s, lambda: self._tail.servable_offset)

    async def wait_for_offset(self, offset: int, timeout_s: float | None) -> bool:
        """Wait until the published image reaches `offset`; False on timeout."""
        return await self._wait(self._image_waiters, offset, timeout_s, lambda: self._image.offset)

    async def caught_up(self) -> MetadataImage:
        """The image once everything handed in so far is published."""
        while self._pending():
            if self._task is not None:
                await asyncio.shield(self._task)
            else:  # records handed in this turn, closed into a batch at the next
                await asyncio.sleep(0)
        return self._image

    # -- the queue --------------------------------------------------------------------------------

    def _close_open(self) -> None:
        if self._open:
            entries, self._open = self._open, []
            self._queue.append(_Batch(entries))
            self._start()

    def _enqueue(self, entries: Entries, start: bool = True) -> int | None:
        fresh = [(o, r) for o, r in entries if o > self._offset]
        if not fresh:
            return None
        self._offset = fresh[-1][0]
        self._queue.append(_Batch(fresh))
        if start:
            self._start()
        return self._offset

    def _enqueue_snapshot(self, work: _Snapshot, start: bool = True) -> None:
        self._queue.append(work)
        if start:
            self._start()

    def _pending(self) -> bool:
        return bool(self._queue or self._open or self._delta is not None)

    def _start(self) -> None:
        if self._task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a plain caller: apply at once
            self._drain()
            return
        self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._queue or self._delta is not None:
                work = self._queue[0] if self._queue else None
                if isinstance(work, _Snapshot) and work.image is None:
                    self._publish_pending()  # what came before it goes out first
                    try:
                        image = await asyncio.to_thread(_parse_snapshot, work.parse)
                    except Exception as exc:
                        self._drop_snapshot(work, exc)
                        continue
                    if work.image is None:  # else a synchronous drain got there first
                        work.image = image
                    continue
                if not self._step(time.perf_counter() + self.slice_seconds, self.slice_records):
                    self.slices += 1
                    await asyncio.sleep(0)
        finally:
            self._task = None

    def _drain(self) -> None:
        self._close_open()
        while self._queue or self._delta is not None:
            work = self._queue[0] if self._queue else None
            if isinstance(work, _Snapshot) and work.image is None:
                self._publish_pending()
                try:
                    work.image = _parse_snapshot(work.parse)
                except Exception as exc:
                    self._drop_snapshot(work, exc)
                    continue
            self._step(None, None)

    def _drop_snapshot(self, work: _Snapshot, exc: Exception) -> None:
        log.error("metadata snapshot could not be parsed (%s: %s); ignored, the image stays at "
                  "offset %d", type(exc).__name__, exc, self._image.offset)
        if work in self._queue:
            self._queue.remove(work)
        if work.installed is not None and not work.installed.done():
            work.installed.set_exception(exc)

    def _step(self, deadline: float | None, budget: int | None) -> bool:
        """Apply queued work until the deadline or record budget (None: no limit); publish at
        batch boundaries. True when the queue is empty (or the head is an unparsed snapshot)."""
        replayed = 0
        while self._queue:
            work = self._queue[0]
            if isinstance(work, _Snapshot):
                if work.image is None:
                    return True
                self._queue.popleft()
                self._install(work.image)
                if work.installed is not None and not work.installed.done():
                    work.installed.set_result(None)
                return not self._queue
            if self._delta is None:
                self._delta = MetadataDelta(self._image)
            delta, entries, tail = self._delta, work.entries, self._tail
            i, n = work.position, len(entries)
            stop = n if budget is None else min(n, i + budget - replayed)
            while i < stop:
                offset, record = entries[i]
                delta.replay(record, offset)
                tail.append(offset, record)
                i += 1
                if deadline is not None and not i & 63 and time.perf_counter() > deadline:
                    break
            replayed += i - work.position
            self._delta_records += i - work.position
            work.position = i
            if i < n:
                return False  # the slice ended inside the batch
            self._queue.popleft()
            tail.end_batch()
            self._wake(self._record_waiters, tail.servable_offset)
            if not self._queue or isinstance(self._queue[0], _Snapshot) or self._delta_records >= self.publish_records:
                self._publish_pending()
                return not self._queue
            if (budget is not None and replayed >= budget) or (deadline is not None and time.perf_counter() > deadline):
                return False
        self._publish_pending()
        return True

    def _publish_pending(self) -> None:
        delta, self._delta = self._delta, None
        self._delta_records = 0
        if delta is not None:
            self._publish(delta, delta.apply())

    def _install(self, image: MetadataImage) -> None:
        """A snapshot: everything before it is in it or replaced by it."""
        self._delta, self._delta_records = None, 0
        self._tail.reset(image.offset + 1)
        self._offset = max(self._offset, image.offset)
        self._publish(MetadataDelta.from_snapshot(self._image, image), image)
        self._wake(self._record_waiters, image.offset)

    def _publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self._image = image
        for listener in self._image_listeners:
            try:
                listener(image)
            except Exception:
                log.exception("metadata image listener %r failed at offset %d", listener, image.offset)
        for publisher in list(self._publishers):
            self._publish_to(publisher, delta, image)
        self._wake(self._image_waiters, image.offset)

    @staticmethod
    def _publish_to(publisher: MetadataPublisher, delta: MetadataDelta, image: MetadataImage) -> None:
        try:
            publisher.on_metadata_update(delta, image)
        except Exception:
            log.exception("metadata publisher %r failed at offset %d", publisher, image.offset)

    # -- waiting ----------------------------------------------------------------------------------

    async def _wait(self, waiters: list[tuple[int, asyncio.Future[None]]], offset: int,
                    timeout_s: float | None, reached: Callable[[], int]) -> bool:
        if reached() >= offset:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (offset, future)
        waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            if entry in waiters:
                waiters.remove(entry)
        return reached() >= offset

    @staticmethod
    def _wake(waiters: list[tuple[int, asyncio.Future[None]]], reached: int) -> None:
        if not waiters:
            return
        ready = [w for w in waiters if w[0] <= reached]
        for entry in ready:
            waiters.remove(entry)
            if not entry[1].done():
                entry[1].set_result(None)


def _checked(build: Callable[[], MetadataImage], offset: int) -> Callable[[], MetadataImage]:
    def parse() -> MetadataImage:
        image = build()
        if not isinstance(image, MetadataImage) or image.offset != offset:
            raise ValueError(f"snapshot at offset {offset} built {type(image).__name__} "
                             f"at {getattr(image, 'offset', None)}")
        return image
    return parse


def _parse_snapshot(parse: Callable[[], MetadataImage]) -> MetadataImage:
    with gc_paused():
        return parse()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True

"""MetadataLoader: committed records → MetadataDelta → new image → publishers (Kafka's `MetadataLoader`).

Controllers feed it from their quorum (`attach(quorum)`: `handle_commit(offset, record)` per
record, `handle_snapshot(offset, image)`); brokers feed it what they fetch from the active
controller (`apply_batch(entries)`, `load_snapshot(image)`). Records coming one by one collect in
a pending delta that is applied once per burst (at the next loop turn, or as soon as anyone reads
`image`), so a 100k-record replay builds one image, not 100k. Each applied delta goes to every
publisher's `on_metadata_update(delta, image)` (a publisher that raises is logged and skipped).

It keeps a bounded tail of recent records so the active controller can serve brokers
`read(from_offset)`; older offsets raise `SnapshotNeededError` (the broker then loads
`loader.image`), and `wait_for_offset` is the long poll. On a controller, this loader is where
the image is built (the Raft thread only keeps the entries, `raft_state.PendingImage`): each
image it publishes is handed back to the quorum (`image_folded`) so its snapshots need no refold.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from typing import Any, Callable, Protocol

from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import MetadataImage

log = logging.getLogger(__name__)


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


class MetadataLoader:
    def __init__(self, *, max_retained_records: int = 100_000) -> None:
        assert max_retained_records > 0
        self.max_retained_records = max_retained_records
        self._image = MetadataImage.EMPTY
        self._pending: MetadataDelta | None = None
        self._flush_scheduled = False
        self._publishers: list[MetadataPublisher] = []
        self._tail_offsets: list[int] = []
        self._tail_records: list[dict[str, Any]] = []
        self._first_available = 0  # the oldest offset `read` can serve
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._image_listeners: list[Callable[[MetadataImage], None]] = []

    @property
    def image(self) -> MetadataImage:
        """The image after every record handed in so far."""
        self.flush()
        return self._image

    @property
    def offset(self) -> int:
        return self._image.offset if self._pending is None else self._pending.offset

    def attach(self, quorum: Any) -> None:
        """Follow a quorum: apply its commits and snapshots (and be its snapshot source if it takes one)."""
        quorum.on_commit(self.handle_commit)
        quorum.on_snapshot(self.handle_snapshot)
        if hasattr(quorum, "set_snapshot_source"):
            quorum.set_snapshot_source(lambda: self.image)
        if hasattr(quorum, "image_folded"):
            self._image_listeners.append(quorum.image_folded)

    def install_publisher(self, publisher: MetadataPublisher) -> None:
        """Add a publisher; it gets the current image at once (as a snapshot delta) if there is one."""
        image = self.image
        self._publishers.append(publisher)
        if image.offset >= 0:
            self._publish_to(publisher, MetadataDelta.from_snapshot(MetadataImage.EMPTY, image), image)

    def remove_publisher(self, publisher: MetadataPublisher) -> None:
        self._publishers.remove(publisher)

    # -- input ------------------------------------------------------------------------------------

    def handle_commit(self, offset: int, record: dict[str, Any]) -> None:
        """One committed record (quorum callback); applied with the rest of its burst."""
        if offset <= self.offset:
            return  # redelivered
        if self._pending is None:
            self._pending = MetadataDelta(self._image)
        self._pending.replay(record, offset)
        self._retain(offset, record)
        if not self._flush_scheduled:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
                self._flush_scheduled = True
            except RuntimeError:  # no loop (a plain caller): apply at once
                self.flush()

    def handle_snapshot(self, offset: int, state: Any) -> None:
        """Quorum callback: the state at `offset` replaced everything."""
        if not isinstance(state, MetadataImage) or state.offset != offset:
            log.error("snapshot at offset %d carries no metadata image (%s); ignored", offset, type(state).__name__)
            return
        self.load_snapshot(state)

    def apply_batch(self, entries: list[tuple[int, dict[str, Any]]]) -> MetadataImage:
        """Replay committed (offset, record) entries (e.g. fetched by a broker) and publish at once."""
        for offset, record in entries:
            if offset > self.offset:
                if self._pending is None:
                    self._pending = MetadataDelta(self._image)
                self._pending.replay(record, offset)
                self._retain(offset, record)
        return self.image

    def load_snapshot(self, image: MetadataImage) -> MetadataImage:
        """Replace the state with a whole image (snapshot install); publishes the difference."""
        self._pending = None  # everything it held is in the snapshot or replaced by it
        delta = MetadataDelta.from_snapshot(self._image, image)
        self._tail_offsets.clear()
        self._tail_records.clear()
        self._first_available = image.offset + 1
        self._publish(delta, image)
        return image

    def flush(self) -> None:
        """Apply the pending delta, if any, and publish it."""
        self._flush_scheduled = False
        delta, self._pending = self._pending, None
        if delta is not None:
            self._publish(delta, delta.apply())

    # -- serving brokers --------------------------------------------------------------------------

    def read(self, from_offset: int, max_records: int = 1000) -> list[tuple[int, dict[str, Any]]]:
        """Committed records with offset >= from_offset (at most max_records); [] when none yet."""
        if from_offset > self.offset:
            return []
        if from_offset < self._first_available:
            raise SnapshotNeededError(from_offset, self._first_available)
        i = bisect.bisect_left(self._tail_offsets, from_offset)
        j = min(len(self._tail_offsets), i + max(1, max_records))
        return list(zip(self._tail_offsets[i:j], self._tail_records[i:j]))

    async def wait_for_offset(self, offset: int, timeout_s: float) -> bool:
        """Wait until the image reaches `offset`; False on timeout."""
        if self.image.offset >= offset:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (offset, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return True
        except asyncio.TimeoutError:
            return self.image.offset >= offset
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _retain(self, offset: int, record: dict[str, Any]) -> None:
        self._tail_offsets.append(offset)
        self._tail_records.append(record)
        excess = len(self._tail_offsets) - self.max_retained_records
        if excess > 0:
            # trim a quarter at a time so the copying is amortised
            cut = min(max(excess, self.max_retained_records // 4), len(self._tail_offsets) - 1)
            self._first_available = self._tail_offsets[cut]
            del self._tail_offsets[:cut]
            del self._tail_records[:cut]

    def _publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self._image = image
        for listener in self._image_listeners:
            listener(image)
        for publisher in list(self._publishers):
            self._publish_to(publisher, delta, image)
        ready = [(o, f) for o, f in self._waiters if o <= image.offset]
        for entry in ready:
            self._waiters.remove(entry)
            if not entry[1].done():
                entry[1].set_result(None)

    @staticmethod
    def _publish_to(publisher: MetadataPublisher, delta: MetadataDelta, image: MetadataImage) -> None:
        try:
            publisher.on_metadata_update(delta, image)
        except Exception:
            log.exception("metadata publisher %r failed at offset %d", publisher, image.offset)

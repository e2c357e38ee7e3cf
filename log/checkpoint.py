"""Small atomic checkpoint files of a partition directory.

Every checkpoint is written whole to `<name>.tmp`, fsynced, renamed over `<name>`, and the
directory fsynced, so a crash leaves either the old or the new file, never a torn one.
`partition.checkpoint` (JSON) holds the partition's `log_start_offset`, `recovery_point` and
`high_watermark` (Kafka keeps these in three per-log-dir files; one file per partition is simpler
here), the `[start, end)` offset ranges recovery quarantined as corrupt, so the segments
holding them are re-validated at the next start rather than trusted, and `first_dirty_offset` (Kafka's
cleaner offset checkpoint): compaction may have removed whole batches and segments below it, so a
gap between segments there is not missing data. The leader-epoch cache has its own Kafka-format
file (`log/epoch_cache.py`).
`producer_state.snapshot` (msgpack) holds the producer state as of an offset (Kafka's
`<offset>.snapshot`: idempotence, open transactions, and the transactions completed above the
high watermark), so a partition starts by replaying only the batches after it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from kraft.log import fault_injection

PARTITION_CHECKPOINT = "partition.checkpoint"
PRODUCER_STATE_SNAPSHOT = "producer_state.snapshot"
_VERSION = 1


def write_atomic(path: Path, data: bytes, sync: bool = True) -> None:
    """Replaces `path` with `data` whole; `sync` False skips both fsyncs, for a file that a
    crash may lose or tear because it can be rebuilt (the rename still never shows a torn one
    to a reader of the live system)."""
    fault_injection.before_write(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class PartitionCheckpoint:
    log_start_offset: int = 0
    recovery_point: int = 0
    high_watermark: int = 0
    quarantined: tuple[tuple[int, int], ...] = ()
    first_dirty_offset: int | None = None  # None: written by a kraft that did not keep it

    @classmethod
    def read(cls, directory: Path) -> PartitionCheckpoint | None:
        """The stored checkpoint, or None when missing or unreadable (recovery then scans all)."""
        try:
            raw = json.loads((directory / PARTITION_CHECKPOINT).read_bytes())
            if raw.get("version") != _VERSION:
                return None
            return cls(
                log_start_offset=int(raw["log_start_offset"]),
                recovery_point=int(raw["recovery_point"]),
                high_watermark=int(raw["high_watermark"]),
                quarantined=tuple((int(a), int(b)) for a, b in raw.get("quarantined", ())),
                first_dirty_offset=(None if raw.get("first_dirty_offset") is None
                                    else int(raw["first_dirty_offset"])),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def write(self, directory: Path) -> None:
        body = {"version": _VERSION, **asdict(self)}
        write_atomic(directory / PARTITION_CHECKPOINT, json.dumps(body).encode())


@dataclass(frozen=True)
class ProducerStateSnapshot:
    """The producer state (`ProducerStateManager.snapshot()` and `unreplicated()`) covering the
    log below `offset`."""

    offset: int
    producers: list[list[Any]]
    unreplicated: list[list[int]] = field(default_factory=list)

    @classmethod
    def read(cls, directory: Path) -> ProducerStateSnapshot | None:
        """The stored snapshot, or None when missing or unreadable (the state is then rebuilt)."""
        try:
            raw = msgpack.unpackb((directory / PRODUCER_STATE_SNAPSHOT).read_bytes(), raw=False)
            if raw.get("version") != _VERSION:
                return None
            return cls(offset=int(raw["offset"]), producers=list(raw["producers"]),
                       unreplicated=list(raw.get("unreplicated", ())))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, msgpack.UnpackException):
            return None

    def write(self, directory: Path) -> None:
        body = {"version": _VERSION, "offset": self.offset, "producers": self.producers,
                "unreplicated": self.unreplicated}
        write_atomic(directory / PRODUCER_STATE_SNAPSHOT, msgpack.packb(body, use_bin_type=True))

    @staticmethod
    def delete(directory: Path) -> None:
        (directory / PRODUCER_STATE_SNAPSHOT).unlink(missing_ok=True)

"""Small atomic checkpoint files of a partition directory.

Every checkpoint is written whole to `<name>.tmp`, fsynced, renamed over `<name>`, and the
directory fsynced, so a crash leaves either the old or the new file, never a torn one.
`partition.checkpoint` (JSON) holds the partition's `log_start_offset`, `recovery_point` and
`high_watermark` (Kafka keeps these in three per-log-dir files; one file per partition is simpler
here). The leader-epoch cache has its own Kafka-format file (`log/epoch_cache.py`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

PARTITION_CHECKPOINT = "partition.checkpoint"
_VERSION = 1


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
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
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def write(self, directory: Path) -> None:
        body = {"version": _VERSION, **asdict(self)}
        write_atomic(directory / PARTITION_CHECKPOINT, json.dumps(body).encode())

"""LeaderEpochFileCache: leader epoch -> first offset written in that epoch (Kafka KIP-101/279).

Followers ask the leader for `end_offset_for(epoch)` of their last epoch and truncate whatever
they hold past it. Entries are strictly increasing in both epoch and start offset. Every change is
checkpointed atomically to `leader-epoch-checkpoint` in Kafka's text format
(version line, count line, then `epoch start_offset` lines).

A log without segment files (a new partition's, created lazily) keeps its cache in memory only
(`deferred`) and writes it with its first append (`write_deferred`, no fsync: every batch carries
its epoch, so recovery rebuilds a lost file from the batches). An entry with no record at its
epoch is all such a log can hold, and it changes no answer: an empty log's epochs end at its log
end either way.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path

from kraft.log.checkpoint import write_atomic

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, path: Path | None, entries: list[EpochEntry] | None = None,
                 *, deferred: bool = False) -> None:
        """`path` None keeps the cache in memory only (tests, scratch logs); `deferred` keeps it
        in memory until `write_deferred`."""
        self.path = path
        self._entries: list[EpochEntry] = list(entries or [])
        self._deferred = deferred

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochFileCache:
        """Reads the checkpoint; a missing or malformed file yields an empty cache (recovery then
        re-assigns epochs from the batches it scans)."""
        path = directory / LEADER_EPOCH_CHECKPOINT
        try:
            entries = _parse(path.read_text())
        except FileNotFoundError:
            entries = []
        except (OSError, ValueError) as e:
            logger.warning("ignoring unreadable %s: %s", path, e)
            entries = []
        return cls(path, entries)

    @property
    def deferred(self) -> bool:
        """Changes are kept in memory until `write_deferred` (a log without segment files)."""
        return self._deferred

    def defer_writes(self) -> None:
        self._deferred = True

    def write_deferred(self) -> None:
        """Writes the entries kept in memory (without fsync, see the module) and from then on
        every change. When the write fails the cache stays deferred, so the next call retries."""
        if not self._deferred:
            return
        if self.path is not None:
            write_atomic(self.path, self._encode(self._entries), sync=False)
        self._deferred = False

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which `offset` was written, per the cache (None before the first entry)."""
        i = bisect_right([e.start_offset for e in self._entries], offset) - 1
        return self._entries[i].epoch if i >= 0 else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Records that `epoch` starts at `start_offset`; returns whether the cache changed.

        As Kafka: no-op when the latest entry already has this epoch at an offset <= start_offset;
        otherwise later entries that conflict (epoch >= epoch or start >= start_offset) go.

        The new entries are checkpointed before the cache uses them: when the write fails (a full
        disk) the cache is unchanged, so the next `assign` of this epoch writes it again. (Kept in
        memory only, the entry would stop every later assign of its epoch from writing it, and a
        restart would lose where the epoch starts.) Truncations change the cache first: a stale
        checkpoint holding entries past the log end or before its start is trimmed at load."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        entries = list(self._entries)
        while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
            entries.pop()
        entries.append(EpochEntry(epoch, start_offset))
        self._flush(entries)
        self._entries = entries
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drops entries starting at or after `end_offset` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        keep = bisect_left([e.start_offset for e in self._entries], end_offset)
        del self._entries[keep:]
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drops entries wholly before `start_offset` (the log start moved there); the last
        dropped entry survives re-based at `start_offset`, as its epoch still covers it."""
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return
        last = removed[-1]
        if len(removed) == 1 and last.start_offset == start_offset:
            return
        self._entries = [EpochEntry(last.epoch, start_offset)] + self._entries[len(removed):]
        self._flush()

    def clear(self) -> None:
        self._entries = []
        self._flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) per Kafka's LeaderEpochFileCache.endOffsetFor:
        the latest epoch ends at the log end offset; an older epoch ends where the next higher
        epoch starts, answered with the largest known epoch <= the requested one; an epoch above
        every known one is (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.latest_epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_start = self._entries[higher].start_offset
        if higher == 0:
            return requested_epoch, higher_start
        return self._entries[higher - 1].epoch, higher_start

    def _flush(self, entries: list[EpochEntry] | None = None) -> None:
        if self.path is None or self._deferred:
            return
        write_atomic(self.path, self._encode(self._entries if entries is None else entries))

    @staticmethod
    def _encode(entries: list[EpochEntry]) -> bytes:
        lines = [str(_VERSION), str(len(entries))]
        lines += [f"{e.epoch} {e.start_offset}" for e in entries]
        return ("\n".join(lines) + "\n").encode()


def _parse(text: str) -> list[EpochEntry]:
    lines = text.split("\n")
    if len(lines) < 2 or int(lines[0]) != _VERSION:
        raise ValueError("bad header")
    count = int(lines[1])
    entries = []
    for line in lines[2 : 2 + count]:
        epoch, offset = line.split()
        entries.append(EpochEntry(int(epoch), int(offset)))
    if len(entries) != count:
        raise ValueError(f"expected {count} entries, found {len(entries)}")
    for a, b in zip(entries, entries[1:]):
        if b.epoch <= a.epoch or b.start_offset <= a.start_offset:
            raise ValueError("entries are not strictly increasing")
    return entries

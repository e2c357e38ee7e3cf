"""Recovery after a crash at every write: the last stable offset, the open transactions and every
segment's `.txnindex` come back as the surviving log says (issue 24: "recovery rebuilds the LSO
and the aborted index").

A transactional workload runs with every file write of the log recorded in order (segments,
indexes, `.txnindex` files, checkpoints and producer-state snapshots). For each crash point (after
each write, and inside each write: its first byte, half of it, all but its last byte: a torn
write) the directory is rebuilt from the writes so far and opened: its aborted-transaction entries
must be exactly those of the original log whose markers survived, its open transactions and last
stable offset those a full replay of the surviving batches gives.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from kraft.log import producer_replay
from kraft.log.config import LogConfig
from kraft.log.partition_log import PartitionLog
from kraft.log.producer_state import ProducerStateManager
from txn_testing import TxnWorkload

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=64)


class WriteJournal:
    """Every file write under `root`, in order, as ops a rebuild replays."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.ops: list[tuple] = []
        self._paths: dict[int, str] = {}
        self._positions: dict[int, int] = {}

    def _mine(self, path: str) -> bool:
        return path.startswith(self.root)

    @contextmanager
    def recording(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        real = {name: getattr(os, name) for name in
                ("open", "pwrite", "write", "ftruncate", "truncate", "replace", "unlink", "mkdir")}

        def open_(path, flags, mode=0o777, *args, **kwargs):
            fd = real["open"](path, flags, mode, *args, **kwargs)
            path = os.fspath(path)
            if self._mine(path):
                self._paths[fd], self._positions[fd] = path, 0
                if flags & os.O_CREAT:
                    self.ops.append(("create", path, bool(flags & os.O_TRUNC)))
            else:
                self._paths.pop(fd, None)
            return fd

        def pwrite(fd, data, position):
            written = real["pwrite"](fd, data, position)
            if fd in self._paths:
                self.ops.append(("pwrite", self._paths[fd], position, bytes(data[:written])))
            return written

        def write(fd, data):
            written = real["write"](fd, data)
            if fd in self._paths:
                self.ops.append(("pwrite", self._paths[fd], self._positions[fd], bytes(data[:written])))
                self._positions[fd] += written
            return written

        def ftruncate(fd, size):
            real["ftruncate"](fd, size)
            if fd in self._paths:
                self.ops.append(("truncate", self._paths[fd], size))

        def truncate(path, size):
            real["truncate"](path, size)
            if self._mine(os.fspath(path)):
                self.ops.append(("truncate", os.fspath(path), size))

        def replace(src, dst, *args, **kwargs):
            real["replace"](src, dst, *args, **kwargs)
            if self._mine(os.fspath(dst)):
                self.ops.append(("replace", os.fspath(src), os.fspath(dst)))

        def unlink(path, *args, **kwargs):
            real["unlink"](path, *args, **kwargs)
            if self._mine(os.fspath(path)):
                self.ops.append(("unlink", os.fspath(path)))

        def mkdir(path, *args, **kwargs):
            real["mkdir"](path, *args, **kwargs)
            if self._mine(os.fspath(path)):
                self.ops.append(("mkdir", os.fspath(path)))

        for name, fake in (("open", open_), ("pwrite", pwrite), ("write", write), ("ftruncate", ftruncate),
                           ("truncate", truncate), ("replace", replace), ("unlink", unlink), ("mkdir", mkdir)):
            monkeypatch.setattr(os, name, fake)
        try:
            yield
        finally:
            for name, fn in real.items():
                monkeypatch.setattr(os, name, fn)

    def crash_points(self) -> Iterator[tuple[int, int | None]]:
        """(ops applied whole, bytes of the next write applied or None)."""
        for i, op in enumerate(self.ops):
            yield i, None
            if op[0] == "pwrite" and len(op[3]) > 1:
                for cut in sorted({1, len(op[3]) // 2, len(op[3]) - 1}):
                    yield i, cut
        yield len(self.ops), None

    def rebuild(self, target: Path, whole: int, torn: int | None) -> None:
        def where(path: str) -> Path:
            return target / os.path.relpath(path, self.root)

        target.mkdir(parents=True)
        ops = self.ops[:whole] + ([self.ops[whole]] if torn is not None else [])
        for n, op in enumerate(ops):
            kind, path = op[0], where(op[1])
            if kind == "mkdir":
                path.mkdir(exist_ok=True)
            elif kind == "create":
                if op[2] or not path.exists():
                    path.write_bytes(b"")
            elif kind == "pwrite":
                data = op[3][:torn] if n == whole else op[3]
                with open(path, "r+b") as f:
                    f.seek(op[2])
                    f.write(data)
            elif kind == "truncate":
                os.truncate(path, op[2])
            elif kind == "replace":
                os.replace(path, where(op[2]))
            elif kind == "unlink":
                path.unlink(missing_ok=True)


def _entries(log: PartitionLog) -> list:
    return [e for s in log.segments for e in s.txn_index.entries]


def _full_replay(log: PartitionLog) -> ProducerStateManager:
    state = ProducerStateManager()
    for segment, position, header in producer_replay.batches_from(log.segments, log.log_start_offset):
        marker = producer_replay.marker_of(segment, position, header) if header.is_control else None
        state.update(header, marker)
    state.on_high_watermark_updated(log.high_watermark)
    return state


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recovery_at_every_write_rebuilds_the_lso_and_the_aborted_index(tmp_path, monkeypatch, seed) -> None:
    original = tmp_path / "original"
    original.mkdir()
    journal = WriteJournal(original)
    with journal.recording(monkeypatch):
        log = PartitionLog.open(original / "t-0", CONFIG, 0)
        work = TxnWorkload(log, seed)
        for _ in range(45):
            work.step()
        entries = _entries(log)
    assert entries and log.segment_count > 2, "the workload aborts transactions over several segments"
    checked = 0
    for whole, torn in journal.crash_points():
        target = tmp_path / f"crash-{whole}-{torn}"
        journal.rebuild(target, whole, torn)
        if not (target / "t-0").exists():
            continue
        recovered = PartitionLog.open(target / "t-0", CONFIG, 0)
        try:
            where = f"crash after {whole} writes (+{torn} bytes of the next): {journal.ops[whole][:3] if whole < len(journal.ops) else 'end'}"
            leo = recovered.log_end_offset
            assert _entries(recovered) == [e for e in entries if e.last_offset < leo], where
            expected = _full_replay(recovered)
            assert recovered._producer_state.ongoing_transactions() == expected.ongoing_transactions(), where
            first = expected.first_unstable_offset()
            hw = recovered.high_watermark
            assert recovered.last_stable_offset == (hw if first is None or first >= hw else first), where
        finally:
            for segment in recovered.segments:  # no close(): its flush would fsync every crash point
                segment.close()
        checked += 1
    assert checked > 200
    log.close()

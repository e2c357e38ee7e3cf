"""A full disk under a partition log: a failed append leaves no torn batch and changes nothing, a
failed index write is only a missed hint, a failed flush does not fail the append it follows, a
failed leader-epoch checkpoint leaves the epoch unrecorded (so the next try writes it), and
appends work again once space returns; the test-only disk-full hook of `log.fault_injection`
fails the writes it covers the same way."""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import pytest

from full_disk import DiskBudget, enospc, fill, tiny_tmpfs
from kraft.log import checkpoint as log_checkpoint
from kraft.log import fault_injection
from kraft.log import index as log_index
from kraft.log import segment as log_segment
from kraft.log.config import LogConfig
from kraft.log.epoch_cache import LeaderEpochFileCache
from kraft.log.partition_log import PartitionLog
from log_testing import all_records, make_batch


def read_offsets(log: PartitionLog) -> list[int]:
    return [r.offset for r in all_records(log.read(0, 10**7).records)]


def test_failed_append_cuts_its_partial_batch(open_log, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log()
    log.append_as_leader(make_batch(3), 0, 0)
    path = log.segments[-1].log_path
    size = path.stat().st_size
    budget = DiskBudget()
    write = log_segment._pwrite_all

    def budgeted(file: Any, data: bytes, position: int) -> None:
        granted = budget.take(len(data))
        write(file, bytes(data)[:granted], position)
        if granted < len(data):
            raise enospc()

    monkeypatch.setattr(log_segment, "_pwrite_all", budgeted)
    budget.free = 20  # the header of the next batch fits, the rest does not
    with pytest.raises(OSError, match="No space left"):
        log.append_as_leader(make_batch(2), 0, 0)
    assert log.log_end_offset == 3 and path.stat().st_size == size
    budget.free = None
    assert log.append_as_leader(make_batch(2), 0, 0).first_offset == 3
    log.close()
    assert read_offsets(open_log()) == list(range(5))


def os_failing(name: str) -> types.SimpleNamespace:
    """The `os` module, but `name` (a write call) fails with ENOSPC."""
    def failing(*_: Any) -> int:
        raise enospc()

    full = types.SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
    setattr(full, name, failing)
    return full


def test_failed_index_write_is_only_a_missed_hint(open_log, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(index_interval_bytes=1)  # every batch after the first writes index entries
    log.append_as_leader(make_batch(3), 0, 0)
    monkeypatch.setattr(log_index, "os", os_failing("pwrite"))
    infos = [log.append_as_leader(make_batch(2), 0, 0) for _ in range(3)]
    assert [i.first_offset for i in infos] == [3, 5, 7] and log.log_end_offset == 9
    assert read_offsets(log) == list(range(9))
    monkeypatch.undo()
    log.append_as_leader(make_batch(2), 0, 0)
    log.close()
    assert read_offsets(open_log()) == list(range(11))


def test_failed_flush_after_an_append_still_answers_it(open_log, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch is in the log once written: a failed flush (its checkpoint cannot be written)
    must not turn it into an error a client would retry (and so duplicate)."""
    log = open_log(flush_messages=1)
    log.append_as_leader(make_batch(3), 0, 0)
    monkeypatch.setattr(log_checkpoint, "os", os_failing("write"))
    assert log.append_as_leader(make_batch(2), 0, 0).first_offset == 3
    monkeypatch.undo()
    log.append_as_leader(make_batch(2), 0, 0)  # flushes and checkpoints again
    assert log.recovery_point == 7
    log.close()
    assert read_offsets(open_log()) == list(range(7))


def test_failed_epoch_checkpoint_leaves_the_epoch_unrecorded(open_log, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new leader's epoch start is used only once durable: kept in memory after a failed write,
    it made every later assign of the epoch a no-op, so the checkpoint never got it and a
    restart lost where the epoch starts."""
    log = open_log()
    log.append_as_leader(make_batch(3), 0, 0)
    monkeypatch.setattr(log_checkpoint, "os", os_failing("write"))
    with pytest.raises(OSError, match="No space left"):
        log.assign_epoch_start(1, 3)
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(0, 0)]
    with pytest.raises(OSError, match="No space left"):  # an append at the new epoch records it first
        log.append_as_leader(make_batch(2), 1, 0)
    assert log.log_end_offset == 3 and log.leader_epoch_cache.latest_epoch == 0
    monkeypatch.undo()
    assert log.assign_epoch_start(1, 3)
    assert [(e.epoch, e.start_offset) for e in LeaderEpochFileCache.load(log.directory).entries] == [(0, 0), (1, 3)]


def test_injected_full_disk_fails_writes_until_cleared(open_log, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`KRAFT_FAULT_DISK_FULL_FILE` (kraft-bench chaos's disk-full without a tmpfs): segment,
    index and checkpoint writes fail with ENOSPC while the file holds a non-zero number."""
    flag = tmp_path / "disk-full"
    monkeypatch.setattr(fault_injection, "_DISK_FULL_FILE", str(flag))
    log = open_log(index_interval_bytes=1)
    log.append_as_leader(make_batch(3), 0, 0)
    flag.write_text("1")
    for write in (lambda: log.append_as_leader(make_batch(2), 0, 0), log.checkpoint,
                  lambda: log.assign_epoch_start(1, 3)):
        with pytest.raises(OSError, match="No space left") as failed:
            write()
        assert "injected" in str(failed.value)
    assert log.log_end_offset == 3 and log.leader_epoch_cache.latest_epoch == 0
    flag.write_text("0")
    assert log.append_as_leader(make_batch(2), 0, 0).first_offset == 3
    flag.unlink()  # missing: not full
    assert log.append_as_leader(make_batch(2), 0, 0).first_offset == 5
    log.close()
    assert read_offsets(open_log()) == list(range(7))


def test_full_tmpfs(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "disk", size="1m") as disk:
        log = PartitionLog.open(disk / "t-0", LogConfig(), 0)
        log.append_as_leader(make_batch(5), 0, 0)
        filler = fill(disk)
        for _ in range(2):
            with pytest.raises(OSError, match="No space left"):
                log.append_as_leader(make_batch(50, size=200), 0, 0)
            assert log.log_end_offset == 5
        filler.unlink()
        assert log.append_as_leader(make_batch(50, size=200), 0, 0).first_offset == 5
        log.close()
        again = PartitionLog.open(disk / "t-0", LogConfig(), 0)
        assert read_offsets(again) == list(range(55))
        again.close()

"""A full disk under a partition log: a failed append leaves no torn batch and changes nothing, a
failed index write is only a missed hint, a failed flush does not fail the append it follows, and
appends work again once space returns."""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import pytest

from full_disk import DiskBudget, enospc, fill, tiny_tmpfs
from log import checkpoint as log_checkpoint
from log import index as log_index
from log import segment as log_segment
from log.config import LogConfig
from log.partition_log import PartitionLog
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

"""Segment files in a bounded cache of descriptors (issue 11: tiny segments exhausted them)."""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Iterator

import pytest

from kraft.log.config import LogConfig
from kraft.log.errors import KafkaStorageError
from kraft.log.file_cache import OPEN_FILES, FileCache
from kraft.log.partition_log import PartitionLog
from log_testing import all_records, make_batch

CAPACITY = 32
SEGMENTS = 3_000


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_cache() -> Iterator[FileCache]:
    """The process-wide cache bounded to CAPACITY for the test."""
    before = OPEN_FILES.capacity
    OPEN_FILES.capacity = CAPACITY
    yield OPEN_FILES
    OPEN_FILES.capacity = before


def test_thousands_of_tiny_segments_stay_within_the_bound(small_cache, tmp_path: Path) -> None:
    """segment.bytes=14 rolls a segment per batch: 3,000 segments are 9,000 files, which used to
    be 9,000 open descriptors. Reads across all of them, a clean reopen and a crash recovery of
    every segment keep the process under the bound."""
    baseline = open_descriptors()
    bound = baseline + CAPACITY
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=14), 0)
    for i in range(SEGMENTS):
        plog.append_as_leader(make_batch(1, ts=i, key=str(i).encode()), 0, i)
    assert len(plog.segments) == SEGMENTS
    assert open_descriptors() <= bound

    def check_reads(view: PartitionLog) -> None:
        for offset in range(SEGMENTS):
            records = all_records(view.read(offset, 1024).records)
            assert records[0].offset == offset and records[0].key == str(offset).encode()
        assert open_descriptors() <= bound  # two logs, active segments included

    check_reads(plog)
    # a crash: nothing flushed, so a second open re-validates every one of the 3,000 segments
    crashed = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=14), 0)
    try:
        assert crashed.log_end_offset == SEGMENTS and len(crashed.segments) == SEGMENTS
        check_reads(crashed)
    finally:
        crashed.close()
    plog.close()
    assert open_descriptors() <= baseline + CAPACITY

    reopened = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=14), 0)
    try:
        assert reopened.log_end_offset == SEGMENTS
        check_reads(reopened)
        reopened.append_as_leader(make_batch(1), 0, SEGMENTS)  # still takes writes
        assert reopened.log_end_offset == SEGMENTS + 1
    finally:
        reopened.close()


def test_least_recently_used_idle_file_is_closed_and_reopened(tmp_path: Path) -> None:
    cache = FileCache(2)
    files = [cache.open(tmp_path / f"f{i}") for i in range(3)]
    assert [f.is_open for f in files] == [False, True, True]
    with files[1] as fd:  # f1 is now the most recently used
        os.pwrite(fd, b"one", 0)
    with files[0] as fd:  # reopens f0 and closes f2, the least recently used
        os.pwrite(fd, b"zero", 0)
    assert [f.is_open for f in files] == [True, True, False]
    with files[2] as fd:
        assert os.pread(fd, 10, 0) == b""
    assert (tmp_path / "f0").read_bytes() == b"zero" and (tmp_path / "f1").read_bytes() == b"one"
    assert cache.open_count == 2


def test_a_lent_file_is_never_closed_under_its_borrower(tmp_path: Path) -> None:
    """Closing a descriptor another thread reads through would let the number be reused for
    another file; the cache goes over its bound instead and comes back when it is returned."""
    cache = FileCache(1)
    first = cache.open(tmp_path / "a")
    with first as fd:
        second = cache.open(tmp_path / "b")
        with second as other_fd:
            assert cache.open_count == 2  # over the bound while both are lent out
            os.pwrite(fd, b"still mine", 0)
            os.pwrite(other_fd, b"mine too", 0)
    assert cache.open_count == 1 and first.is_open and not second.is_open
    assert (tmp_path / "a").read_bytes() == b"still mine"
    assert (tmp_path / "b").read_bytes() == b"mine too"


def test_idle_active_segments_are_closed_too(small_cache, tmp_path: Path) -> None:
    """An idle partition's active segment gives its descriptors back: a hundred partitions with
    data hold at most the cache's bound, and each takes writes and reads again (reopened)."""
    baseline = open_descriptors()
    logs = [PartitionLog.open(tmp_path / f"t-{i}", LogConfig(), 0) for i in range(100)]
    try:
        for i, plog in enumerate(logs):
            plog.append_as_leader(make_batch(1, key=str(i).encode()), 0, 0)
        assert open_descriptors() <= baseline + CAPACITY
        for i, plog in enumerate(logs):
            plog.append_as_leader(make_batch(1, key=str(i).encode()), 0, 1)
            assert [r.key for r in all_records(plog.read(0, 4096).records)] == [str(i).encode()] * 2
        assert open_descriptors() <= baseline + CAPACITY
    finally:
        for plog in logs:
            plog.close()


def test_closed_file_is_not_reopened(tmp_path: Path) -> None:
    cache = FileCache(4)
    cached = cache.open(tmp_path / "gone")
    cached.close()
    with pytest.raises(KafkaStorageError):
        with cached:
            pass


@pytest.fixture
def scarce_descriptors() -> Iterator[list[int]]:
    """Lowers the soft open-files limit to what is open now plus a few, and yields a list the
    test fills with descriptors of its own; closes them and restores the limit afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    taken: list[int] = []
    try:
        yield taken
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_out_of_descriptors_is_a_storage_error_and_changes_nothing(
    small_cache, tmp_path: Path, scarce_descriptors: list[int]
) -> None:
    """When the process has no descriptor left even after closing every idle segment file (here
    the only open one is lent out), a roll answers KAFKA_STORAGE_ERROR naming the limit (not an
    OSError, the old 500), and the log takes writes again once descriptors are free."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=14), 0)
    busy = small_cache.open(tmp_path / "busy")  # the one file the cache keeps open: lent below
    lent = False
    try:
        plog.append_as_leader(make_batch(1), 0, 0)
        small_cache.capacity = 1  # the log's idle files are closed
        busy.__enter__()
        lent = True
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_descriptors() + 8, hard))
        while True:  # every descriptor the limit allows is taken
            try:
                scarce_descriptors.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        with pytest.raises(KafkaStorageError) as raised:
            plog.append_as_leader(make_batch(1), 0, 1)
        assert raised.value.error_code == "KAFKA_STORAGE_ERROR"
        assert "out of file descriptors" in str(raised.value) and "log.open.files.max" in str(raised.value)
        assert plog.log_end_offset == 1 and len(plog.segments) == 1
        while scarce_descriptors:
            os.close(scarce_descriptors.pop())
        busy.__exit__(None, None, None)
        lent = False
        plog.append_as_leader(make_batch(1), 0, 1)
        assert plog.log_end_offset == 2
        assert [r.offset for r in all_records(plog.read(0, 4096).records)] == [0]
        assert [r.offset for r in all_records(plog.read(1, 4096).records)] == [1]
    finally:
        while scarce_descriptors:
            os.close(scarce_descriptors.pop())
        if lent:
            busy.__exit__(None, None, None)
        plog.close()
        busy.close()

"""The broker's log directories (JBOD, KIP-858): directory ids in meta.properties, placement on
the least-loaded live directory by partition count, a partition found twice refusing the start,
a directory that fails at start or later going offline alone, and which errors count as a failed
directory."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kraft.broker.log_dirs import LogDirs, partition_of
from kraft.cluster_identity import read_meta_properties, write_meta_properties
from kraft.config import ConfigError


def loaded(*paths: Path, node_id: int = 1) -> LogDirs:
    dirs = LogDirs(paths, node_id)
    dirs.load()
    return dirs


def test_each_directory_gets_an_id_that_it_keeps(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    first = loaded(a, b)
    ids = [d.directory_id for d in first.dirs]
    assert len(set(ids)) == 2 and all(ids)
    assert [d.directory_id for d in loaded(a, b).dirs] == ids  # read back at the next start
    write_meta_properties(a / "meta.properties", "cluster-x", 1)  # the cluster id learnt later
    props = read_meta_properties(a / "meta.properties")
    assert props["cluster.id"] == "cluster-x" and props["directory.id"] == ids[0]
    with pytest.raises(ConfigError):
        loaded(a, b, node_id=2)  # another node's directory


def test_new_replicas_go_to_the_live_directory_with_the_fewest_partitions(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for name in ("t-0", "t-1", "u-0"):
        (a / name).mkdir(parents=True)
    (a / "t-2.3f2a-delete").mkdir()  # a deletion in progress is no partition
    dirs = loaded(a, b)
    assert dirs.place("t-1").path == a  # where it is
    assert [dirs.place(f"n-{i}").path for i in range(4)] == [b, b, b, a]  # 3 here: b fills up to 3
    assert {d.path: len(d.partitions) for d in dirs.dirs} == {a: 4, b: 3}  # ties go to the first
    dirs.forget("n-0")
    assert dirs.place("n-9").path == b


def test_a_partition_in_two_directories_refuses_the_start(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "t-0").mkdir(parents=True)
    (b / "t-0").mkdir(parents=True)
    with pytest.raises(ConfigError, match="t-0"):
        loaded(a, b)


def test_a_directory_that_fails_goes_offline_alone(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    dirs = loaded(a, b)
    assert dirs.place("t-0").path == a and dirs.place("t-1").path == b
    d = dirs.dir_of(b)
    assert d is not None
    assert dirs.fail(d, OSError(errno.EIO, "Input/output error")) and not dirs.fail(d, OSError(errno.EIO, "again"))
    assert dirs.offline_ids() == [d.directory_id] and [x.path for x in dirs.offline] == [b]
    assert dirs.place("t-1").path == b  # its replicas stay there, offline: never a second copy
    assert dirs.place("t-2").path == a  # new ones go to the live directory


def test_a_directory_failed_at_start_takes_no_unknown_partition_elsewhere(tmp_path: Path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "file"
    b.write_text("not a directory")  # as a mount that is not there
    dirs = loaded(a, b)
    assert [x.path for x in dirs.offline] == [b] and dirs.offline_ids() == []  # its id is unknown
    assert not dirs.place("t-0").online  # it may be on the failed one: offline, not recreated


def test_which_errors_mean_a_failed_directory(tmp_path: Path) -> None:
    assert LogDirs.is_dir_failure(OSError(errno.EIO, "x"), tmp_path)
    assert LogDirs.is_dir_failure(OSError(errno.EROFS, "x"), tmp_path)  # remounted read-only
    assert not LogDirs.is_dir_failure(OSError(errno.ENOSPC, "x"), tmp_path)  # heals when space is freed
    assert not LogDirs.is_dir_failure(OSError(errno.ENOENT, "x"), tmp_path)  # one file, the directory is there
    assert LogDirs.is_dir_failure(OSError(errno.ENOENT, "x"), tmp_path / "gone")  # the mount vanished
    assert not LogDirs.is_dir_failure(ValueError("x"), tmp_path)


def test_a_full_disk_fails_its_directory_once_no_write_succeeded_for_the_timeout(tmp_path: Path) -> None:
    """ENOSPC that does not heal (KIP-858: Kafka takes the directory offline at the first): the
    first failed write starts the clock, a write that succeeds there stops it, and a failed write
    `timeout_ms` after the first one means the directory is to fail."""
    a, b = tmp_path / "a", tmp_path / "b"
    dirs = loaded(a, b)
    da, db = dirs.dir_of(a), dirs.dir_of(b)
    assert da is not None and db is not None
    full = OSError(errno.ENOSPC, "No space left on device")
    assert not dirs.full_too_long(db, full, 1_000, 5_000)
    assert not dirs.full_too_long(db, full, 5_999, 5_000)
    assert not dirs.full_too_long(da, full, 5_999, 5_000)  # each directory has its own clock
    assert not dirs.full_too_long(db, OSError(errno.EIO, "x"), 9_000, 5_000)  # not a full disk
    dirs.wrote(b)  # space again: the clock starts over at the next ENOSPC
    assert not dirs.full_too_long(db, full, 7_000, 5_000)
    assert dirs.full_too_long(db, full, 12_000, 5_000)
    assert dirs.full_too_long(da, full, 10_999, 5_000)
    assert dirs.full_too_long(db, full, 12_000, 0) and not dirs.full_too_long(db, ValueError("x"), 12_000, 0)


def test_partition_directory_names() -> None:
    assert partition_of("my-topic-12") == ("my-topic", 12)
    assert partition_of("__cluster_metadata-0") is None
    assert partition_of("t-0.abc-delete") is None and partition_of("meta.properties") is None

"""The chaos disk-full fault: a size-limited tmpfs per node where one can be mounted, else ENOSPC
injected at the file layer (the node's KRAFT_FAULT_DISK_FULL_FILE); either way the fault is done,
and the checker counts as injected only faults that were."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from full_disk import tiny_tmpfs
from kraft.bench.chaos.checker import check
from kraft.bench.chaos.faults import FILE_LAYER, TMPFS, Injector, prepare_disk_full
from kraft.bench.chaos.schedule import FaultEvent
from kraft.log import fault_injection
from kraft.log.batch import build_batch
from kraft.log.config import LogConfig
from kraft.log.fault_injection import DISK_FULL_ENV
from kraft.log.partition_log import PartitionLog


def batch_of(value: bytes) -> bytes:
    return build_batch([(None, value, [], 1_700_000_000_000)])


def test_tmpfs_where_every_node_can_mount_one(tmp_path: Path) -> None:
    mounts: list[tuple[Path, int]] = []
    disk = prepare_disk_full(tmp_path, [1, 2, 3], 256, mount=lambda d, mb: mounts.append((d, mb)),
                             unmount_dir=lambda d: pytest.fail("nothing to unmount"))
    assert disk.method == TMPFS
    assert mounts == [(tmp_path / f"data-{i}", 256) for i in (1, 2, 3)]
    assert disk.paths == {i: tmp_path / f"data-{i}" for i in (1, 2, 3)}
    assert disk.env(1) == {}  # a real full filesystem: no hook


def test_file_layer_when_a_tmpfs_cannot_be_mounted(tmp_path: Path) -> None:
    mounted: list[Path] = []
    unmounted: list[Path] = []

    def mount(directory: Path, _: int) -> str | None:
        if directory.name == "data-2":
            return "mount: permission denied"
        mounted.append(directory)
        return None

    disk = prepare_disk_full(tmp_path, [1, 2, 3], 256, mount=mount, unmount_dir=unmounted.append)
    assert disk.method == FILE_LAYER and "permission denied" in disk.why
    assert unmounted == mounted == [tmp_path / "data-1"]  # the node that got one gives it back
    assert disk.env(3) == {DISK_FULL_ENV: str(tmp_path / "disk-full-3")}
    assert all(disk.paths[i].read_text() == "0" for i in (1, 2, 3))  # not full until the fault
    assert "file layer" in disk.describe()


class FakeNode(SimpleNamespace):
    pass


def injector(tmp_path: Path, disk: Any, sleep: Any) -> tuple[Injector, FakeNode]:
    node = FakeNode(node_id=2, data_dir=tmp_path / "data-2")
    node.data_dir.mkdir(exist_ok=True)
    cluster = SimpleNamespace(nodes={2: node})
    return Injector(cluster, SimpleNamespace(heal_all=lambda: None), [], {}, disk, 1, sleep), node  # type: ignore[arg-type]


def test_file_layer_fault_fails_the_node_writes_while_it_lasts(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    disk = prepare_disk_full(tmp_path, [1, 2, 3], 256, mount=lambda d, mb: "no mount command")
    # the node process: its log package reads the flag named by its environment
    monkeypatch.setattr(fault_injection, "_DISK_FULL_FILE", disk.env(2)[DISK_FULL_ENV])
    plog = PartitionLog.open(tmp_path / "data-2" / "t-0", LogConfig(), 0)
    during: list[Any] = []

    def sleep(seconds: float) -> bool:
        assert seconds == 5.0
        try:
            plog.append_as_leader(batch_of(b"during"), 0, 0)
        except OSError as e:
            during.append(e.errno)
        with open(tmp_path / "node-2.log", "a") as f:  # as the node logs it
            f.write("ERROR t-0: cannot write the log: [Errno 28] No space left on device\n")
        return False

    inject, _ = injector(tmp_path, disk, sleep)
    (tmp_path / "node-2.log").write_text("started\n")
    detail = inject.apply(FaultEvent(20.0, "disk-full", 2, 5.0, ""))
    assert during == [errno.ENOSPC]
    assert detail == {"target": 2, "method": FILE_LAYER, "enospc_logged": 1}
    assert disk.paths[2].read_text() == "0" and disk.paths[1].read_text() == "0"
    assert plog.append_as_leader(batch_of(b"after"), 0, 0).first_offset == 0  # healed
    plog.close()


def test_the_disk_full_hook_can_fill_one_log_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flag file naming directories (one a line) fails only the writes under them: one full
    log directory of a broker with several (tests/integration/test_log_dirs.py)."""
    flag = tmp_path / "disk-full"
    monkeypatch.setattr(fault_injection, "_DISK_FULL_FILE", str(flag))
    full, other = tmp_path / "disk2", tmp_path / "disk1"
    flag.write_text(f"{full}\n")
    with pytest.raises(OSError) as raised:
        fault_injection.before_write(full / "t-0" / "00000000000000000000.log")
    assert raised.value.errno == errno.ENOSPC
    fault_injection.before_write(other / "t-1" / "00000000000000000000.log")
    fault_injection.before_write(tmp_path / "disk22" / "t-0.log")  # a sibling with a longer name
    fault_injection.before_write()  # a write that names no file (the Raft journal's)
    flag.write_text("")
    fault_injection.before_write(full / "t-0" / "00000000000000000000.log")
    flag.write_text("1")  # a number: every write of the node, as before
    with pytest.raises(OSError):
        fault_injection.before_write()


def test_tmpfs_fault_fills_and_frees_the_node_filesystem(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "data-2", size="1m") as data:
        disk = prepare_disk_full(tmp_path, [2], 1, mount=lambda d, mb: None)
        free: list[int] = []

        def sleep(_: float) -> bool:
            free.append(os.statvfs(data).f_bavail)
            return False

        inject, _ = injector(tmp_path, disk, sleep)
        detail = inject.apply(FaultEvent(20.0, "disk-full", 2, 5.0, ""))
        assert detail["method"] == TMPFS and detail["filler_bytes"] > 0
        assert free == [0] and not list(data.iterdir())


def test_not_prepared_is_not_done_and_not_counted(tmp_path: Path) -> None:
    inject, _ = injector(tmp_path, None, lambda _: False)
    detail = inject.apply(FaultEvent(20.0, "disk-full", 2, 5.0, ""))
    assert detail["done"] is False
    events = [
        {"k": "fault", "t": 1.0, "fault": "disk-full", "target": 2},
        {"k": "heal", "t": 6.0, "fault": "disk-full", "target": 2, "detail": detail},
        {"k": "fault", "t": 7.0, "fault": "torn-write", "target": 1},
        {"k": "heal", "t": 7.5, "fault": "torn-write", "target": 1,
         "detail": {"done": False, "why": "no partition directory"}},
        {"k": "fault", "t": 8.0, "fault": "torn-write", "target": 3},
        {"k": "heal", "t": 8.5, "fault": "torn-write", "target": 3, "detail": {"done": True}},
        {"k": "fault", "t": 9.0, "fault": "disk-full", "target": 1},
        {"k": "heal", "t": 14.0, "fault": "disk-full", "target": 1,
         "detail": {"method": FILE_LAYER, "enospc_logged": 3}},
    ]
    found = check(events)
    assert found.faults == {"disk-full": 1, "torn-write": 1}
    assert found.faults_not_injected == {"disk-full": 1, "torn-write": 1}
    assert len(found.examples["not_injected"]) == 2

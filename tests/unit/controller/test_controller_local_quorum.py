"""LocalQuorum on tmp_path: durable appends, restart replay, torn/corrupt tails, snapshots bounding the log,
a full disk (KAFKA_STORAGE_ERROR meanwhile, writable again without a restart)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from full_disk import BudgetedFile, DiskBudget, fill, tiny_tmpfs
from kraft.controller import log_store
from kraft.controller.errors import (
    InvalidBatchError, MetadataLogCorruptError, MetadataStorageError, NotControllerError,
)
from kraft.controller.log_store import LOG_DIR_NAME
from kraft.controller.metadata_loader import MetadataLoader, SnapshotNeededError
from kraft.controller.quorum import LocalQuorum
from kraft.metadata.log_rules import CLAIM_CONTROLLER
from kraft.metadata.records import Partition, Topic


def topic_batch(name: str, partitions: int = 1) -> list[dict]:
    tid = f"id-{name}"
    return [Topic(name=name, topic_id=tid).to_dict()] + [
        {k: v for k, v in Partition(topic_id=tid, partition=p, replicas=(1,), isr=(1,), leader=1).to_dict().items()
         if k != "controller_epoch"}  # the quorum stamps its epoch
        for p in range(partitions)
    ]


def strip_epoch(batch: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "controller_epoch"} for r in batch]


async def open_quorum(data_dir: Path, **kwargs) -> tuple[LocalQuorum, MetadataLoader]:
    quorum = LocalQuorum(data_dir, 1, **kwargs)
    loader = MetadataLoader()
    loader.attach(quorum)
    await quorum.start()
    await loader.caught_up()  # the loader publishes in its own task
    return quorum, loader


def segments(data_dir: Path, suffix: str = ".log") -> list[Path]:
    return sorted((data_dir / LOG_DIR_NAME).glob("*" + suffix))


async def test_propose_commits_applies_and_survives_restart(tmp_path: Path) -> None:
    quorum, loader = await open_quorum(tmp_path)
    assert quorum.is_active_controller() and quorum.active_controller() == (1, 1) and quorum.leader() == 1
    offset = await quorum.propose(strip_epoch(topic_batch("a", 3)), request_id="r1")
    await loader.caught_up()
    assert offset == quorum.metadata_offset == loader.image.offset == 4  # claim at 0, then 4 records
    assert len(loader.image.topic_by_name("a").partitions) == 3
    assert loader.image.request_ids == {"r1": 4}
    await quorum.close()
    assert not quorum.is_active_controller()
    with pytest.raises(NotControllerError):
        await quorum.propose(strip_epoch(topic_batch("b")))

    again, loader2 = await open_quorum(tmp_path)
    assert again.active_controller() == (1, 2)  # a restart claims the next epoch
    image = loader2.image
    assert image.topic_by_name("a") == loader.image.topic_by_name("a") and image.controller_epoch == 2
    await again.propose(strip_epoch(topic_batch("b")))
    assert loader2.image.topic_by_name("b") is not None
    await again.close()


async def test_records_of_another_epoch_are_refused(tmp_path: Path) -> None:
    quorum, _ = await open_quorum(tmp_path)
    with pytest.raises(NotControllerError):
        await quorum.propose([{**topic_batch("a")[0], "controller_epoch": 0}])
    with pytest.raises(ValueError):
        await quorum.propose([])
    with pytest.raises(TypeError):  # not msgpack-able: nothing written
        await quorum.propose([{"type": "NoOp", "bad": object()}])
    with pytest.raises(InvalidBatchError):  # claims are the quorum's own records
        await quorum.propose([{"type": CLAIM_CONTROLLER, "node_id": 1}])
    assert quorum.metadata_offset == 0
    await quorum.close()


@pytest.mark.parametrize("restart_from", ["log", "snapshot"])
async def test_a_request_is_committed_once_even_across_restarts(tmp_path: Path, restart_from: str) -> None:
    """The log's rule (`log_rules.admit`), as on every Raft voter: a request id already in the
    window commits nothing again and answers the offset it got first; the window is rebuilt
    from the log or the snapshot at start."""
    quorum, loader = await open_quorum(tmp_path)
    first, again = await asyncio.gather(  # e.g. a caller that gave up waiting, retrying at once
        quorum.propose(strip_epoch(topic_batch("a", 2)), request_id="r1"),
        quorum.propose(strip_epoch(topic_batch("a-retry", 2)), request_id="r1"))
    assert first == again == 3 == quorum.metadata_offset
    await loader.caught_up()
    assert loader.image.topic_by_name("a-retry") is None and loader.image.request_ids == {"r1": 3}
    await quorum.propose(strip_epoch(topic_batch("b")), request_id="r2")
    if restart_from == "snapshot":
        assert await quorum.snapshot() == 5
    await quorum.close()

    restarted, loader2 = await open_quorum(tmp_path)
    assert await restarted.propose(strip_epoch(topic_batch("a-late")), request_id="r1") == 3
    assert await restarted.propose(strip_epoch(topic_batch("b-late")), request_id="r2") == 5
    assert restarted.metadata_offset == 6  # only the restart's claim was written
    assert await restarted.propose(strip_epoch(topic_batch("c")), request_id="r3") == 8
    await loader2.caught_up()
    assert {t for t in ("a-late", "b-late", "c") if loader2.image.topic_by_name(t)} == {"c"}
    await restarted.close()


@pytest.mark.parametrize("damage", ["partial_frame", "garbage", "flipped_byte"])
async def test_torn_or_corrupt_tail_is_truncated(tmp_path: Path, damage: str) -> None:
    quorum, loader = await open_quorum(tmp_path)
    await quorum.propose(strip_epoch(topic_batch("a")))
    good_size = segments(tmp_path)[-1].stat().st_size
    await quorum.propose(strip_epoch(topic_batch("b")))
    await quorum.close()
    path = segments(tmp_path)[-1]
    data = bytearray(path.read_bytes())
    if damage == "partial_frame":
        data = data[: len(data) - 7]
    elif damage == "garbage":
        data = data[:good_size] + os.urandom(3)
    else:
        data[good_size + 20] ^= 0xFF  # inside the first record of "b"
    path.write_bytes(bytes(data))

    again, loader2 = await open_quorum(tmp_path)
    image = loader2.image
    assert image.topic_by_name("a") is not None and image.topic_by_name("b") is None
    assert path.stat().st_size > good_size  # truncated at `good_size`, then the new claim appended
    await again.propose(strip_epoch(topic_batch("c")))
    await again.close()
    third, loader3 = await open_quorum(tmp_path)
    assert loader3.image.topic_by_name("c") is not None and loader3.image.topic_by_name("a") is not None
    await third.close()


async def test_snapshots_bound_the_log_and_restart_from_them(tmp_path: Path) -> None:
    quorum, loader = await open_quorum(tmp_path, snapshot_interval_records=10)
    for i in range(12):
        await quorum.propose(strip_epoch(topic_batch(f"t{i}", 2)))
    await loader.caught_up()
    assert await quorum.snapshot() == loader.image.offset
    final = loader.image
    await quorum.close()
    snaps = segments(tmp_path, ".snapshot")
    assert [int(p.name.split(".")[0]) for p in snaps] == [final.offset]
    assert [int(p.name.split(".")[0]) for p in segments(tmp_path)] == [final.offset + 1]  # older segments gone

    again, loader2 = await open_quorum(tmp_path)
    assert loader2.image.topics == final.topics and loader2.image.offset == final.offset + 1
    # brokers asking for old offsets must load a snapshot first
    with pytest.raises(SnapshotNeededError):
        loader2.read(0)
    assert [o for o, _ in loader2.read(final.offset + 1)] == [final.offset + 1]
    await again.close()


async def test_unreadable_newest_snapshot_falls_back_or_fails_loudly(tmp_path: Path) -> None:
    quorum, loader = await open_quorum(tmp_path, snapshot_interval_records=1000)
    await quorum.propose(strip_epoch(topic_batch("a")))
    await quorum.snapshot()
    await quorum.close()
    (snap,) = segments(tmp_path, ".snapshot")
    snap.write_bytes(snap.read_bytes()[:-3])  # torn snapshot, and the log before it is gone
    with pytest.raises(MetadataLogCorruptError, match="records from 0 are missing"):
        await open_quorum(tmp_path)
    # knowingly: the log restarts empty, and so it opens again
    quorum, loader = await open_quorum(tmp_path, log_recovery="truncate")
    assert loader.image.topic_by_name("a") is None
    await quorum.propose(strip_epoch(topic_batch("b")))
    await quorum.close()
    quorum, loader = await open_quorum(tmp_path)
    assert loader.image.topic_by_name("b") is not None
    await quorum.close()


@pytest.mark.parametrize("damage", ["flipped_byte", "zeroed_length"])
async def test_damage_followed_by_valid_records_is_rot_not_a_torn_tail(tmp_path: Path, damage: str) -> None:
    """Issue 22 item 13: one flipped byte in the middle of the metadata log was taken for a torn
    tail: every later record was dropped (topics gone) and the node served on. Now the lone node
    refuses to start, naming the file, the byte and the way out, and changes nothing on disk."""
    quorum, loader = await open_quorum(tmp_path)
    for name in ("a", "b", "c"):
        await quorum.propose(strip_epoch(topic_batch(name)))
    await quorum.close()
    path = segments(tmp_path)[-1]
    data = bytearray(path.read_bytes())
    b_frame = data.index(b"id-b") - 60  # inside the frame of topic b, before its record
    frame_start = next(p for p in log_store_frames(bytes(data)) if p > b_frame - 200 and p <= b_frame)
    if damage == "flipped_byte":
        data[b_frame] ^= 0x01
    else:
        data[frame_start:frame_start + 4] = b"\0\0\0\0"
    path.write_bytes(bytes(data))

    with pytest.raises(MetadataLogCorruptError) as raised:
        await open_quorum(tmp_path)
    message = str(raised.value)
    assert str(path) in message and f"corrupt at byte {frame_start} of {len(data)}" in message
    assert "--override metadata.log.recovery=truncate" in message and "backup" in message
    assert path.read_bytes() == bytes(data)  # nothing cut

    # the escape hatch, knowingly: the log is cut at the damage, what precedes it replays
    again, loader2 = await open_quorum(tmp_path, log_recovery="truncate")
    image = loader2.image
    assert image.topic_by_name("a") is not None
    assert image.topic_by_name("b") is None and image.topic_by_name("c") is None
    await again.close()
    third, loader3 = await open_quorum(tmp_path)  # and the cut log starts by itself again
    assert loader3.image.topic_by_name("a") is not None
    await third.close()


def log_store_frames(data: bytes) -> list[int]:
    """Where each frame of a metadata log segment starts."""
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += 8 + int.from_bytes(data[pos:pos + 4], "big")
    return starts


async def test_cancelled_proposer_does_not_lose_the_commit(tmp_path: Path) -> None:
    quorum, loader = await open_quorum(tmp_path)
    task = asyncio.ensure_future(quorum.propose(strip_epoch(topic_batch("a"))))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    offset = await quorum.propose(strip_epoch(topic_batch("b")))
    assert offset == 4 and loader.image.topic_by_name("a") and loader.image.topic_by_name("b")
    await quorum.close()


# -- a full disk -----------------------------------------------------------------------------------


async def check_full_disk_then_recovery(data_dir: Path, fill_disk, free_disk) -> None:
    """A proposal on a full disk fails with KAFKA_STORAGE_ERROR and commits nothing; the node
    stays the controller, and the first proposal after space returns commits (no restart)."""
    quorum, loader = await open_quorum(data_dir)
    await quorum.propose(strip_epoch(topic_batch("before")))
    size = segments(data_dir)[-1].stat().st_size
    offset = quorum.metadata_offset
    fill_disk()
    for name in ("refused", "refused-again"):  # every proposal tries the disk again, none hangs
        with pytest.raises(MetadataStorageError) as failed:
            await quorum.propose(strip_epoch(topic_batch(name, 200)))
        assert failed.value.error_code == "KAFKA_STORAGE_ERROR"
        assert "No space left" in (quorum.storage_error or "")
        assert quorum.metadata_offset == loader.image.offset == offset
        assert segments(data_dir)[-1].stat().st_size == size  # the partial frame was cut away
        assert quorum.is_active_controller()
    free_disk()
    assert await quorum.propose(strip_epoch(topic_batch("after"))) == offset + 2
    assert quorum.storage_error is None
    await quorum.close()

    again, loader2 = await open_quorum(data_dir)
    image = loader2.image
    assert image.topic_by_name("before") is not None and image.topic_by_name("after") is not None
    assert image.topic_by_name("refused") is None and image.topic_by_name("refused-again") is None
    await again.close()


async def test_full_disk_injected_at_the_file_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = DiskBudget()
    opened = log_store._open_segment
    monkeypatch.setattr(log_store, "_open_segment", lambda path: BudgetedFile(opened(path), budget))

    def fill_disk() -> None:
        budget.free = 100  # part of the next frame fits, then ENOSPC

    def free_disk() -> None:
        budget.free = None

    await check_full_disk_then_recovery(tmp_path, fill_disk, free_disk)


async def test_full_tmpfs(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "disk", size="1m") as disk:
        fillers: list[Path] = []
        await check_full_disk_then_recovery(disk, lambda: fillers.append(fill(disk)),
                                            lambda: fillers.pop().unlink())


async def test_snapshot_on_a_full_disk_leaves_no_partial_file(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "disk", size="1m") as disk:
        quorum, loader = await open_quorum(disk, snapshot_interval_records=1000)
        for i in range(20):
            await quorum.propose(strip_epoch(topic_batch(f"t{i}", 50)))
        filler = fill(disk)
        assert await quorum.snapshot() in (None, loader.image.offset)  # roll or write fails
        assert not list((disk / LOG_DIR_NAME).glob("*.tmp"))
        filler.unlink()
        offset = await quorum.propose(strip_epoch(topic_batch("after")))
        assert await quorum.snapshot() == offset
        await quorum.close()
        again, loader2 = await open_quorum(disk)
        assert loader2.image.topic_by_name("after") is not None and loader2.image.topic_by_name("t19") is not None
        await again.close()

"""A full disk under a Raft voter's journal (issue 11, item 5 on the Raft path): a lone voter in
this process, real pysyncobj, ENOSPC injected at the journal's file layer (and on a real full
tmpfs where one can be mounted). A proposal fails at once with KAFKA_STORAGE_ERROR instead of
timing out, `storage_error` says why, the voter resigns (issue 26: a voter that cannot write
neither leads nor votes; with others they elect a leader, see
tests/integration/test_raft_quorum.py), so the next proposal is refused NOT_CONTROLLER at once;
once space returns its probe finds the disk writable, it leads again and the first proposal
commits (no restart), and a restart finds every acknowledged record and none of the refused
ones. Before the fix pysyncobj's tick logged the journal's OSError and dropped the command:
`propose` answered REQUEST_TIMED_OUT after the request timeout."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import pytest

from full_disk import DiskBudget, fill, tiny_tmpfs
from harness import free_port, wait_until  # tests/ is on sys.path (tests/conftest.py)
from kraft.controller.errors import MetadataStorageError, NotControllerError
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.raft_journal import JournalAppendError, RaftJournal
from kraft.controller.raft_quorum import METADATA_DIR, JOURNAL_FILE, RaftQuorum, RaftQuorumConfig
from kraft.metadata.records import Partition, Topic

# far above an answer's time: only a dropped command reaches it (the bug answered after 5 s)
REQUEST_TIMEOUT_S = 30.0


def topic_batch(name: str, partitions: int = 1) -> list[dict[str, Any]]:
    tid = f"id-{name}"
    return [Topic(name=name, topic_id=tid).to_dict()] + [
        {k: v for k, v in Partition(topic_id=tid, partition=p, replicas=(1,), isr=(1,), leader=1)
         .to_dict().items() if k != "controller_epoch"}  # the quorum stamps its epoch
        for p in range(partitions)
    ]


def without_epoch(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "controller_epoch"} for r in batch]


async def open_voter(data_dir: Path, port: int) -> tuple[RaftQuorum, MetadataLoader]:
    quorum = RaftQuorum(RaftQuorumConfig(node_id=1, voters={1: ("127.0.0.1", port)}, data_dir=data_dir,
                                         secret="s", request_timeout=REQUEST_TIMEOUT_S))
    loader = MetadataLoader()
    loader.attach(quorum)
    await quorum.start()
    await wait_until(quorum.is_active_controller)
    return quorum, loader


async def check_full_disk_then_recovery(data_dir: Path, fill_disk: Callable[[], None],
                                        free_disk: Callable[[], None]) -> None:
    port = free_port()
    quorum, loader = await open_voter(data_dir, port)
    try:
        before = await quorum.propose(without_epoch(topic_batch("before")), request_id="before")
        await wait_until(lambda: loader.image.offset == before)
        journal = data_dir / METADATA_DIR / JOURNAL_FILE
        size = journal.stat().st_size
        fill_disk()
        started = time.monotonic()
        with pytest.raises(MetadataStorageError) as failed:
            await quorum.propose(without_epoch(topic_batch("refused", 200)), request_id="refused")
        assert time.monotonic() - started < REQUEST_TIMEOUT_S / 3  # answered, not timed out
        assert failed.value.error_code == "KAFKA_STORAGE_ERROR"
        assert "No space left" in str(failed.value)
        assert "No space left" in (quorum.storage_error or "")
        assert quorum.metadata_offset == loader.image.offset == before
        assert journal.stat().st_size == size  # the partial entry was cut away
        await wait_until(lambda: not quorum.is_active_controller())  # it resigned
        with pytest.raises(NotControllerError):
            await quorum.propose(without_epoch(topic_batch("refused-again")), request_id="refused-again")
        free_disk()
        await wait_until(quorum.is_active_controller)  # the probe found space: it leads again
        after = await quorum.propose(without_epoch(topic_batch("after")), request_id="after")
        assert after == before + 3  # a new claim; the refused proposals took no offsets
        await wait_until(lambda: quorum.storage_error is None, 5)  # the meta file within a second
        assert loader.image.topic_by_name("after") is not None
        assert loader.image.topic_by_name("refused") is None
    finally:
        await quorum.close()

    again, loader2 = await open_voter(data_dir, port)
    try:
        image = loader2.image
        assert image.topic_by_name("before") is not None and image.topic_by_name("after") is not None
        assert image.topic_by_name("refused") is None and image.topic_by_name("refused-again") is None
        assert again.storage_error is None
    finally:
        await again.close()


async def test_full_disk_injected_at_the_file_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = DiskBudget()
    budget.patch_raft_journal(monkeypatch)

    def fill_disk() -> None:
        budget.free = 100  # part of the next entry fits, then ENOSPC

    def free_disk() -> None:
        budget.free = None

    await check_full_disk_then_recovery(tmp_path, fill_disk, free_disk)


async def test_full_tmpfs(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "disk", size="2m") as disk:
        fillers: list[Path] = []
        await check_full_disk_then_recovery(disk, lambda: fillers.append(fill(disk)),
                                            lambda: fillers.pop().unlink())


def test_a_failed_append_leaves_nothing_and_the_next_one_writes(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    journal = RaftJournal(tmp_path / "j.log")
    journal.add(b"one", 1, 1)
    journal.add(b"two", 2, 1)
    journal.flush()
    size = journal.path.stat().st_size
    budget = DiskBudget()
    budget.patch_raft_journal(monkeypatch)
    budget.free = 5
    with pytest.raises(JournalAppendError) as failed:
        journal.add(b"three" * 100, 3, 1)
    assert failed.value.errno == 28 and isinstance(failed.value, OSError)
    assert len(journal) == 2 and journal.path.stat().st_size == size
    assert "No space left" in (journal.storage_error or "")
    journal.setRaftCommitIndex(2)
    journal.onOneSecondTimer()  # the meta cannot be saved either: retried later, never raised
    assert not list(tmp_path.glob("*.tmp"))
    budget.free = None
    journal.add(b"three", 3, 1)  # the same index again
    journal.flush()
    assert "No space left" in (journal.storage_error or "")  # the meta save is still pending
    journal.onOneSecondTimer()
    assert journal.storage_error is None
    journal._destroy()
    reopened = RaftJournal(tmp_path / "j.log")
    assert [reopened[i] for i in range(len(reopened))] == [(b"one", 1, 1), (b"two", 2, 1), (b"three", 3, 1)]
    assert reopened.getRaftCommitIndex() == 2
    reopened._destroy()

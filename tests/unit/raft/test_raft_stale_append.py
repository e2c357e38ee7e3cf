"""A delayed or repeated AppendEntries must not cut entries a follower already holds (Raft deletes
only from the first conflicting entry). pysyncobj's follower deleted everything after the message's
prevLogIdx before adding the message's entries: a stale copy (a slow connection delivering after a
newer one, a resent range after a reset) cut entries the follower had acknowledged, which the
leader may have counted toward a commit; found by `kraft-bench chaos` (pysyncobj logged
"truncating already-applied log entries"). Driven through pysyncobj's real message handler."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.node import TCPNode

from harness import free_port
from kraft.controller.raft_journal import RaftJournal


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[tuple[SyncObj, RaftJournal]]:
    journal = RaftJournal(tmp_path / "raft-journal.log")
    conf = SyncObjConf(autoTick=False, journalFile=journal, fullDumpFile=str(tmp_path / "raft.snapshot"))
    syncobj = SyncObj(f"127.0.0.1:{free_port()}", [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"], conf)
    try:
        yield syncobj, journal
    finally:
        syncobj.destroy()


def append_entries(syncobj: SyncObj, term: int, prev: tuple[int, int], entries: list[tuple[bytes, int, int]],
                   commit: int) -> None:
    leader = TCPNode("127.0.0.1:1")  # replies to it go nowhere: only the follower's log matters here
    message: dict[str, Any] = {"type": "append_entries", "term": term, "commit_index": commit,
                               "prevLogIdx": prev[0], "prevLogTerm": prev[1], "entries": entries}
    syncobj._SyncObj__onMessageReceived(leader, message)


def held(journal: RaftJournal) -> list[tuple[int, int]]:
    return [(idx, term) for _, idx, term in journal[:]]


def test_a_stale_append_entries_keeps_the_entries_already_held(follower):
    syncobj, journal = follower
    append_entries(syncobj, 1, (1, 0), [(b"a", 2, 1), (b"b", 3, 1), (b"c", 4, 1), (b"d", 5, 1)], 1)
    assert held(journal) == [(1, 0), (2, 1), (3, 1), (4, 1), (5, 1)]
    append_entries(syncobj, 1, (2, 1), [(b"b", 3, 1)], 1)  # an older copy, delivered late
    assert held(journal) == [(1, 0), (2, 1), (3, 1), (4, 1), (5, 1)]
    append_entries(syncobj, 1, (1, 0), [], 1)  # a stale heartbeat
    assert held(journal) == [(1, 0), (2, 1), (3, 1), (4, 1), (5, 1)]
    append_entries(syncobj, 1, (5, 1), [(b"e", 6, 1)], 1)  # and the log goes on
    assert held(journal) == [(1, 0), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1)]


def test_a_conflicting_entry_still_truncates_from_there(follower):
    syncobj, journal = follower
    append_entries(syncobj, 1, (1, 0), [(b"a", 2, 1), (b"b", 3, 1), (b"c", 4, 1)], 1)
    # a new leader at term 2 never had index 3 of term 1: 3 and 4 go, its 3 takes their place
    append_entries(syncobj, 2, (2, 1), [(b"x", 3, 2)], 2)
    assert held(journal) == [(1, 0), (2, 1), (3, 2)]
    assert journal[-1][0] == b"x"


def test_the_kept_entries_are_on_disk(follower):
    syncobj, journal = follower
    append_entries(syncobj, 1, (1, 0), [(b"a", 2, 1), (b"b", 3, 1), (b"c", 4, 1)], 1)
    append_entries(syncobj, 1, (2, 1), [(b"b", 3, 1)], 1)
    reopened = RaftJournal(journal.path)
    try:
        assert held(reopened) == [(1, 0), (2, 1), (3, 1), (4, 1)]
    finally:
        reopened._destroy()

"""A voter whose journal dropped damaged entries (issue 22 item 13: rot in the middle of the Raft
journal) must not take part in elections until the leader has sent them again: those entries may
be committed, and a vote judged against its shortened log could elect a leader without them (or
itself, with the votes of voters that never had them). Driven through pysyncobj's real handler
and tick, as `test_raft_stale_append.py` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from pysyncobj import SyncObjConf
from pysyncobj.node import TCPNode

from harness import free_port
from kraft.controller.raft_journal import RaftJournal
from kraft.controller.raft_quorum import _KraftSyncObj

CANDIDATE = TCPNode("127.0.0.1:1")  # replies to it go nowhere: only the voter's decisions count


def damaged_journal(path: Path) -> RaftJournal:
    """A journal that held indices 1-6 (6 committed) and lost 3 onwards to a flipped byte."""
    journal = RaftJournal(path, on_rot="repair")
    for idx in range(1, 7):
        journal.add(f"command-{idx}".encode(), idx, 1)
    journal.setRaftCommitIndex(6)
    journal._destroy()
    data = bytearray(path.read_bytes())
    data[data.index(b"command-3")] ^= 0xFF
    path.write_bytes(bytes(data))
    journal = RaftJournal(path, on_rot="repair")
    assert journal.repairing and len(journal) == 2
    return journal


@pytest.fixture
def voter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[_KraftSyncObj, RaftJournal]]:
    journal = damaged_journal(tmp_path / "raft-journal.log")
    conf = SyncObjConf(autoTick=False, journalFile=journal, fullDumpFile=str(tmp_path / "raft.snapshot"))
    others = [f"127.0.0.1:{free_port()}" for _ in range(request.param)]
    syncobj = _KraftSyncObj(f"127.0.0.1:{free_port()}", others, conf)
    try:
        yield syncobj, journal
    finally:
        syncobj.destroy()


def receive(syncobj: _KraftSyncObj, message: dict[str, Any]) -> None:
    syncobj._SyncObj__onMessageReceived(CANDIDATE, message)


def append_entries(syncobj: _KraftSyncObj, term: int, prev: tuple[int, int], first: int, last: int) -> None:
    entries = [(f"command-{idx}".encode(), idx, 1) for idx in range(first, last + 1)]
    receive(syncobj, {"type": "append_entries", "term": term, "commit_index": last,
                      "prevLogIdx": prev[0], "prevLogTerm": prev[1], "entries": entries})


def request_vote(syncobj: _KraftSyncObj, term: int) -> None:
    # a candidate whose log is far ahead: any voter not repairing grants it
    receive(syncobj, {"type": "request_vote", "term": term, "last_log_index": 2, "last_log_term": 1})


@pytest.mark.parametrize("voter", [2], indirect=True)
def test_a_repairing_voter_grants_no_vote_until_the_leader_sent_the_entries_again(voter) -> None:
    syncobj, journal = voter
    request_vote(syncobj, 5)
    assert syncobj._SyncObj__votedForNodeId is None  # withheld
    append_entries(syncobj, 5, (2, 1), 3, 5)
    assert journal.repairing  # index 6 is not back yet
    request_vote(syncobj, 6)
    assert syncobj._SyncObj__votedForNodeId is None
    append_entries(syncobj, 6, (5, 1), 6, 6)
    assert not journal.repairing and [e[1] for e in journal[:]] == [1, 2, 3, 4, 5, 6]
    receive(syncobj, {"type": "request_vote", "term": 7, "last_log_index": 6, "last_log_term": 1})
    assert syncobj._SyncObj__votedForNodeId == CANDIDATE.id  # a voter again


@pytest.mark.parametrize("voter", [0], indirect=True)
def test_a_repairing_voter_never_stands_for_election(voter) -> None:
    syncobj, journal = voter
    for _ in range(5):
        syncobj._SyncObj__raftElectionDeadline = 0  # its election timeout has long passed
        syncobj.doTick(0)
        assert not syncobj._isLeader() and syncobj._SyncObj__votedForNodeId is None
    for idx in range(3, 7):  # what the leader would send
        journal.add(f"command-{idx}".encode(), idx, 1)
    syncobj._SyncObj__raftElectionDeadline = 0
    syncobj.doTick(0)
    assert syncobj._isLeader()  # the same voter, repaired, stands and (alone) wins

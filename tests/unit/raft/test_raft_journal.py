"""RaftJournal on real files: reload, torn and corrupt tails, durable prefix/suffix deletes, the
meta (term, vote, commit index), lining up with pysyncobj's dump, importing pysyncobj's own
journal, and a stateful test against a list model with crashes that lose unsynced bytes."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import pysyncobj.journal
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pysyncobj.serializer import Serializer

from kraft.controller.errors import MetadataLogCorruptError
from kraft.controller.raft_journal import MAGIC, JournalFormatError, RaftJournal


def entry(idx: int, term: int = 1) -> tuple[bytes, int, int]:
    return (f"command-{idx}".encode() * (idx % 3 + 1), idx, term)


def filled(path: Path, count: int, **kwargs) -> RaftJournal:
    journal = RaftJournal(path, **kwargs)
    for idx in range(1, count + 1):
        journal.add(*entry(idx))
    journal.flush()
    return journal


def reopen(journal: RaftJournal, **kwargs) -> RaftJournal:
    journal._destroy()
    return RaftJournal(journal.path, **kwargs)


def write_dump(dump_file: Path, before_last: tuple, last: tuple) -> None:
    """A dump as pysyncobj's serializer writes it: (state, last entry, entry before, cluster)."""
    serializer = Serializer(str(dump_file), 2**16, False, None, None, None)
    serializer.serialize(({"state": "at %d" % last[1]}, last, before_last, set()), before_last[1])


def test_entries_and_meta_survive_reopen(tmp_path: Path) -> None:
    journal = filled(tmp_path / "j.log", 10)
    journal.setCurrentTerm(3, "127.0.0.1:9093")
    journal.setRaftCommitIndex(8)
    journal = reopen(journal)
    assert list(journal[:]) == [entry(i) for i in range(1, 11)]
    assert (journal.getCurrentTerm(), journal.getVotedForNodeId(), journal.getRaftCommitIndex()) \
        == (3, "127.0.0.1:9093", 8)
    journal.add(*entry(11))
    journal = reopen(journal)
    assert journal[-1] == entry(11) and len(journal) == 11
    journal._destroy()


def test_torn_tail_is_cut_at_the_last_whole_entry(tmp_path: Path, caplog) -> None:
    journal = filled(tmp_path / "j.log", 5)
    journal._destroy()
    size = os.path.getsize(journal.path)
    os.truncate(journal.path, size - 3)  # the last entry lost its last bytes
    with caplog.at_level(logging.WARNING, logger="kraft.controller.raft_journal"):
        journal = RaftJournal(journal.path)
    assert list(journal[:]) == [entry(i) for i in range(1, 5)]
    assert "torn entry" in caplog.text and "ends at index 4" in caplog.text
    journal.add(*entry(5, term=2))  # appends go after the last whole entry
    journal = reopen(journal)
    assert list(journal[:]) == [entry(i) for i in range(1, 5)] + [entry(5, term=2)]
    journal._destroy()


def _damage_third_entry(journal: RaftJournal) -> bytes:
    """Flips the first byte of entry 3's command; returns the damaged file."""
    journal._destroy()
    data = bytearray(journal.path.read_bytes())
    data[data.index(b"command-3")] ^= 0xFF
    journal.path.write_bytes(bytes(data))
    return bytes(data)


THIRD_COMMAND = len(MAGIC) + sum(8 + 16 + len(entry(i)[0]) for i in (1, 2)) + 8 + 16


def test_damage_in_the_middle_with_peers_drops_the_rest_and_repairs(tmp_path: Path, caplog) -> None:
    """Issue 22 item 13, a voter with peers: the damaged entry and everything after it go (the
    leader sends them again), and until the journal holds the last index it had (6) again the
    voter is `repairing`: no vote, no candidacy (a lost entry may be committed). A restart
    mid-repair keeps it repairing."""
    journal = filled(tmp_path / "j.log", 6)
    journal.setRaftCommitIndex(6)
    data = _damage_third_entry(journal)
    with caplog.at_level(logging.WARNING, logger="kraft.controller.raft_journal"):
        journal = RaftJournal(journal.path, on_rot="repair")
    assert list(journal[:]) == [entry(1), entry(2)] and journal.repairing
    assert "CRC mismatch" in caplog.text and "neither votes nor stands for election" in caplog.text
    assert data[THIRD_COMMAND] == ord("c") ^ 0xFF
    assert os.path.getsize(journal.path) < THIRD_COMMAND  # cut on disk too
    journal.add(*entry(3))
    journal = reopen(journal, on_rot="repair")
    assert journal.repairing  # durable: not a vote after a restart either
    for idx in range(4, 7):
        assert journal.repairing
        journal.add(*entry(idx))
    assert not journal.repairing
    journal = reopen(journal, on_rot="repair")
    assert not journal.repairing and len(journal) == 6
    journal._destroy()


def test_damage_in_the_middle_of_a_lone_voters_journal_refuses_to_open(tmp_path: Path) -> None:
    journal = filled(tmp_path / "j.log", 6)
    data = _damage_third_entry(journal)
    with pytest.raises(MetadataLogCorruptError) as raised:
        RaftJournal(journal.path)
    assert "from index 3 on" in str(raised.value) and "metadata.log.recovery=truncate" in str(raised.value)
    assert journal.path.read_bytes() == data  # nothing cut
    truncated = RaftJournal(journal.path, on_rot="truncate")  # the operator's choice
    assert list(truncated[:]) == [entry(1), entry(2)] and not truncated.repairing
    truncated._destroy()


def test_damage_the_dump_covers_loses_nothing(tmp_path: Path) -> None:
    journal = filled(tmp_path / "j.log", 6)
    write_dump(tmp_path / "dump", entry(5), entry(6))
    _damage_third_entry(journal)
    journal = RaftJournal(journal.path, dump_file=tmp_path / "dump")  # a lone voter: no error
    assert not journal.repairing
    journal._destroy()


def test_a_commit_index_past_the_journal_end_repairs_a_voter_with_peers(tmp_path: Path) -> None:
    journal = filled(tmp_path / "j.log", 6)
    journal.setRaftCommitIndex(6)
    journal._destroy()
    os.truncate(journal.path, os.path.getsize(journal.path) - 1)
    journal = RaftJournal(journal.path, on_rot="repair")
    assert journal.repairing and journal.getRaftCommitIndex() == 5
    journal.add(*entry(6, term=2))
    assert not journal.repairing
    journal._destroy()


def test_prefix_suffix_deletes_and_clear_survive_reopen(tmp_path: Path) -> None:
    journal = filled(tmp_path / "j.log", 12)
    journal.deleteEntriesTo(4)  # log compaction: the journal now starts at index 5
    journal.deleteEntriesFrom(6)  # a Raft conflict: indices 11, 12 go
    journal = reopen(journal)
    assert list(journal[:]) == [entry(i) for i in range(5, 11)]
    journal.add(*entry(11, term=2))
    journal = reopen(journal)
    assert journal[-1] == entry(11, term=2) and journal[0] == entry(5)
    journal.clear()
    journal.add(*entry(40, term=3))
    journal.add(*entry(41, term=3))
    journal = reopen(journal)
    assert list(journal[:]) == [entry(40, term=3), entry(41, term=3)]
    journal._destroy()


def test_commit_index_past_the_journal_end_is_clamped(tmp_path: Path, caplog) -> None:
    journal = filled(tmp_path / "j.log", 6)
    journal.setRaftCommitIndex(6)
    journal._destroy()
    os.truncate(journal.path, os.path.getsize(journal.path) - 1)
    with caplog.at_level(logging.WARNING, logger="kraft.controller.raft_journal"):
        journal = RaftJournal(journal.path)
    assert journal.getRaftCommitIndex() == 5
    assert "commit index 6 is past the journal end 5" in caplog.text
    journal._destroy()


def test_a_failed_fsync_is_never_retried(tmp_path: Path, caplog) -> None:
    """After a failed fsync the kernel may have dropped the pages: a later fsync that succeeds
    proves nothing, so every later flush (before an ack or a commit) fails too."""
    journal = filled(tmp_path / "j.log", 3)
    read, write = os.pipe()  # fdatasync on a pipe fails (EINVAL): a real failing fsync
    real_fd, journal._fd = journal._fd, write
    journal.add(*entry(4))
    with caplog.at_level(logging.CRITICAL, logger="kraft.controller.raft_journal"):
        with pytest.raises(OSError):
            journal.flush()
    assert "fsync failed" in caplog.text
    journal._fd = real_fd
    with pytest.raises(OSError):
        journal.setRaftCommitIndex(4)  # what pysyncobj calls before applying: refused
    assert journal.getRaftCommitIndex() == 1
    os.close(read)
    os.close(write)
    with pytest.raises(OSError):
        journal._destroy()
    assert list(RaftJournal(journal.path)[:]) == [entry(i) for i in range(1, 4)]


def test_journal_is_trimmed_to_a_dump_installed_before_compaction_finished(tmp_path: Path,
                                                                            caplog) -> None:
    """The crash window of pysyncobj's compaction: the dump holds index 12-13, the journal was
    not trimmed yet. pysyncobj would clear a journal not starting at the dump's last two entries;
    opened with the dump, it starts there and keeps its tail."""
    dump = tmp_path / "raft.snapshot"
    journal = filled(tmp_path / "j.log", 20)
    write_dump(dump, entry(12), entry(13))
    with caplog.at_level(logging.INFO, logger="kraft.controller.raft_journal"):
        journal = reopen(journal, dump_file=dump)
    assert list(journal[:]) == [entry(i) for i in range(12, 21)]
    assert "log compaction was interrupted" in caplog.text
    journal = reopen(journal, dump_file=dump)  # already lined up: unchanged
    assert list(journal[:]) == [entry(i) for i in range(12, 21)]
    journal._destroy()


def test_journal_without_the_dump_tail_is_left_to_pysyncobj(tmp_path: Path, caplog) -> None:
    dump = tmp_path / "raft.snapshot"
    journal = filled(tmp_path / "j.log", 8)
    write_dump(dump, entry(30), entry(31))  # e.g. a snapshot from the leader past this journal
    with caplog.at_level(logging.WARNING, logger="kraft.controller.raft_journal"):
        journal = reopen(journal, dump_file=dump)
    assert len(journal) == 8
    assert "does not hold the dump's last entries (index 31" in caplog.text
    journal._destroy()


def test_pysyncobj_journal_is_imported_once(tmp_path: Path) -> None:
    legacy_path = tmp_path / "raft.journal"
    legacy = pysyncobj.journal.FileJournal(str(legacy_path))
    for idx in range(1, 8):
        legacy.add(*entry(idx, term=2))
    legacy.setCurrentTerm(4, "127.0.0.1:1")
    legacy.setRaftCommitIndex(6)
    legacy.onOneSecondTimer()
    legacy._destroy()

    journal = RaftJournal(tmp_path / "j.log", legacy_file=legacy_path)
    assert list(journal[:]) == [entry(i, term=2) for i in range(1, 8)]
    assert (journal.getCurrentTerm(), journal.getVotedForNodeId(), journal.getRaftCommitIndex()) \
        == (4, "127.0.0.1:1", 6)
    assert not legacy_path.exists() and not Path(f"{legacy_path}.meta").exists()
    journal = reopen(journal, legacy_file=legacy_path)
    assert len(journal) == 7
    journal._destroy()


class JournalAgainstAList(RuleBasedStateMachine):
    """Any sequence of pysyncobj's calls, reopens and crashes: the journal equals the model,
    and a crash loses at most entries written after the last fsync, never an earlier one."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="raft-journal-"))
        self.journal = RaftJournal(self.dir / "j.log")
        self.model: list[tuple[bytes, int, int]] = []
        self.term = 1
        self._synced()

    def _synced(self) -> None:
        self.durable = len(self.model)
        self.durable_size = os.path.getsize(self.journal.path)

    def teardown(self) -> None:
        self.journal._destroy()
        shutil.rmtree(self.dir)

    @rule(count=st.integers(1, 5), new_term=st.booleans(), size=st.integers(0, 300))
    def add(self, count: int, new_term: bool, size: int) -> None:
        self.term += new_term
        for _ in range(count):
            idx = self.model[-1][1] + 1 if self.model else 1
            item = (os.urandom(size), idx, self.term)
            self.journal.add(*item)
            self.model.append(item)

    @rule()
    def flush(self) -> None:
        self.journal.flush()
        self._synced()

    @rule(commit=st.integers(1, 1000))
    def commit(self, commit: int) -> None:
        self.journal.setRaftCommitIndex(commit)
        self._synced()

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete_from(self, data) -> None:
        position = data.draw(st.integers(0, len(self.model)))
        self.journal.deleteEntriesFrom(position)
        del self.model[position:]
        self._synced()

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete_to(self, data) -> None:
        position = data.draw(st.integers(0, len(self.model)))
        self.journal.deleteEntriesTo(position)
        del self.model[:position]
        self._synced()

    @rule()
    def clear(self) -> None:
        self.journal.clear()
        self.model.clear()
        self._synced()

    @rule()
    def reopen(self) -> None:
        self.journal = reopen(self.journal)
        self._synced()

    @rule(data=st.data())
    def crash(self, data) -> None:
        """Power loss: the bytes past the last fsync survive only in part."""
        os.close(self.journal._fd)  # no flush: the process is gone
        size = os.path.getsize(self.journal.path)
        os.truncate(self.journal.path, data.draw(st.integers(self.durable_size, size)))
        self.journal = RaftJournal(self.journal.path)
        kept = len(self.journal)
        assert self.durable <= kept <= len(self.model)
        del self.model[kept:]
        self._synced()

    @invariant()
    def same_entries(self) -> None:
        assert list(self.journal[:]) == self.model
        assert len(self.journal) == len(self.model)


TestJournalAgainstAList = JournalAgainstAList.TestCase
TestJournalAgainstAList.settings = settings(max_examples=60, stateful_step_count=30,
                                            deadline=None)


def test_magic_of_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.log"
    path.write_bytes(b"PYSYNCOBJ" + bytes(40))
    with pytest.raises(JournalFormatError):
        RaftJournal(path)
    assert MAGIC not in path.read_bytes()

"""The controller quorum's Raft journal: pysyncobj's `Journal` on storage of this project.

pysyncobj 0.3.17's own `FileJournal` is an mmap that is never fsynced, and `SyncObj` clears it
whenever its first two entries differ from the dump it loads, which a crash (or a close) between
writing a dump and trimming the journal makes them do: acknowledged records were lost. Here:

- `RaftJournal`: one append-only file of entries framed with length + CRC32C. An entry is
  fsynced before this voter acknowledges it to anyone (`raft_transport.RaftTransport`) or counts it
  committed (`setRaftCommitIndex`): one fsync per batch, not per entry. A torn or corrupt tail
  is cut at the last whole entry on load. Prefix deletion (log compaction) rewrites the kept tail
  into a new file renamed over the old one; suffix deletion (a Raft conflict) and `clear`
  truncate; both fsync before returning. currentTerm, votedFor and the commit index live in a
  small meta file replaced atomically.
- At open, the journal is reconciled with the dump: pysyncobj installs a dump (fsynced, see
  `durable_replace`) before it trims the journal, so a journal that still starts before the
  dump's last two entries is trimmed to them here, and pysyncobj never clears it.
- A failed append (a full disk: ENOSPC) leaves nothing of the entry in the file and raises
  `JournalAppendError`; `storage_error` says why until a write succeeds again: the next append,
  or `probe` (the voter tries once a second while it gets nothing to append), so space coming
  back ends the failure without a restart. While `storage_error` is set the voter neither leads
  nor votes (`raft_quorum`).

docs/internals.md, "The controller quorum's journal", has the format and the recovery rules.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import struct
from pathlib import Path
from typing import Any, Iterator

import crc32c
import pysyncobj.journal
import pysyncobj.serializer
import pysyncobj.syncobj
from pysyncobj import pickle as syncobj_pickle

from kraft.controller.errors import MetadataLogCorruptError
from kraft.log import fault_injection
from kraft.log.errors import CorruptRecordError
from kraft.log.scan import BadOffsetsError, CrcFraming, Frame, scan

logger = logging.getLogger(__name__)

MAGIC = b"KRJRNL\x00\x01"  # file type and format version
_FRAME = struct.Struct("<II")  # payload length, CRC32C of the payload
_ENTRY = struct.Struct("<QQ")  # payload: Raft index, term, then the command bytes
MAX_ENTRY_BYTES = 256 * 1024 * 1024  # a length above this is corruption, not an entry

Entry = tuple[bytes, int, int]  # (command, index, term), as pysyncobj passes and compares them


class JournalFormatError(RuntimeError):
    """The journal file is not one of ours (wrong magic): refuse rather than overwrite it."""


class JournalAppendError(OSError):
    """`RaftJournal.add` could not write the entry (ENOSPC, EIO): nothing of it stays in the
    journal, so the same index can be written again. Same errno and text as the cause."""


class RaftJournal(pysyncobj.journal.Journal):
    """pysyncobj's `Journal` interface; used only by the Raft thread after `__init__`.

    `dump_file`: pysyncobj's full dump, to reconcile the journal's start with (see the module
    docstring). `legacy_file`: a pysyncobj `FileJournal` to import once, then delete.
    """

    def __init__(self, path: Path, dump_file: Path | None = None,
                 legacy_file: Path | None = None, on_rot: str = "fail") -> None:
        """`on_rot`: what a journal damaged in the middle (valid entries after the damage) does
        at open (see `_handle_rot`): "repair" (a voter with peers), "fail" (a lone voter) or
        "truncate" (a lone voter whose operator chose metadata.log.recovery=truncate)."""
        assert on_rot in ("repair", "fail", "truncate")
        self.path = Path(path)
        self.on_rot = on_rot
        self._meta_path = self.path.with_name(self.path.name + ".meta")
        self._entries: list[Entry] = []
        self._starts: list[int] = []  # byte offset of each entry's frame
        self._size = len(MAGIC)
        self._dirty = False  # written entries not fsynced yet
        self._fsync_error: OSError | None = None  # see flush
        self._append_error: OSError | None = None  # the last `add` failed with this
        self._meta_error: OSError | None = None  # the last save of the meta file failed with this
        self._matching_from: int | None = None  # see keep_matching_from
        # repair_until: after dropping damaged entries this voter neither votes nor stands for
        # election until its journal holds this index again (see `repairing`)
        self._meta: dict[str, Any] = {"current_term": 0, "voted_for": None, "commit_index": 1,
                                      "repair_until": None}
        self._meta_saved = True
        self._fd = -1
        if legacy_file is not None and Path(legacy_file).exists() and not self.path.exists():
            self._import_legacy(Path(legacy_file))
        self._meta.update(self._read_meta())
        resumed = self._meta["repair_until"] is not None  # a restart mid-repair
        dump = _read_dump_tail(Path(dump_file)) if dump_file is not None and Path(dump_file).exists() else None
        self._load(dump)
        if dump is not None:
            self._reconcile_with_dump(*dump)
        if self._entries and self._meta["commit_index"] > self._entries[-1][1]:
            logger.warning("raft journal %s: stored commit index %d is past the journal end %d; "
                           "using the journal end", self.path, self._meta["commit_index"],
                           self._entries[-1][1])
            if self.on_rot == "repair":  # committed entries were lost: not a vote until they are back
                self._start_repair(self._meta["commit_index"])
            self._meta["commit_index"] = self._entries[-1][1]
            self._meta_saved = False
        repair_until = self._meta["repair_until"]
        if repair_until is not None:
            if self._entries and self._entries[-1][1] >= repair_until:
                self._end_repair()
            elif resumed:
                logger.warning("raft journal %s: still repairing: this voter neither votes nor "
                               "stands for election until the leader has sent index %d again",
                               self.path, repair_until)
        if legacy_file is not None and self.path.exists():
            for stale in (Path(legacy_file), Path(f"{legacy_file}.meta")):
                stale.unlink(missing_ok=True)

    # -- pysyncobj's Journal interface ------------------------------------------------------

    def add(self, command: Any, idx: int, term: int) -> None:
        if self._matching_from is not None and self._entries and self._matching_from <= idx <= self._entries[-1][1]:
            position = idx - self._entries[0][1]
            if position < 0 or self._entries[position][2] == term:
                return  # same index and term: the entry held (Raft's log matching), or compacted
            self._truncate(position)  # the first conflict: it and everything after go
        # The loader ends the journal at an index gap: writing one would lose what follows.
        assert not self._entries or idx == self._entries[-1][1] + 1, \
            f"index {idx} appended after {self._entries[-1][1]}"
        command = pysyncobj.journal.to_bytes(command)
        payload = _ENTRY.pack(idx, term) + command
        try:
            if os.fstat(self._fd).st_size > self._size:  # an earlier failed add could not cut its tail
                os.ftruncate(self._fd, self._size)
            _write_all(self._fd, _FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload)
        except OSError as exc:
            # A half-written frame would hide every later entry from the next load.
            try:
                os.ftruncate(self._fd, self._size)  # frees space: works on a full disk
            except OSError:
                pass  # cut before the next add (above), or by the next load
            if self._append_error is None:  # the transition, not every refused command
                logger.error("raft journal %s: metadata log append failed: %s; this controller "
                             "resigns the leadership and does not vote until a write succeeds "
                             "(free space on, or repair, the disk of %s: no restart is needed)",
                             self.path, exc, self.path.parent)
            self._append_error = exc
            if exc.errno is None:
                raise JournalAppendError(str(exc)) from exc
            raise JournalAppendError(exc.errno, exc.strerror or os.strerror(exc.errno)) from exc
        if self._append_error is not None:
            logger.warning("raft journal %s: metadata log is writable again (it failed with: %s)",
                           self.path, self._append_error)
            self._append_error = None
        self._entries.append((command, idx, term))
        self._starts.append(self._size)
        self._size += _FRAME.size + len(payload)
        self._dirty = True
        if self._meta["repair_until"] is not None and idx >= self._meta["repair_until"]:
            self._end_repair()

    def _end_repair(self) -> None:
        """The journal holds the repair index again: once that is durable the voter may vote."""
        until = self._meta["repair_until"]
        try:
            self.flush()
        except OSError:
            return  # tried again at the next entry
        self._meta["repair_until"] = None
        self._meta_saved = False
        try:
            self._save_meta()
        except OSError:
            pass  # retried every second; the next open ends the repair from the entries held
        logger.warning("raft journal %s: holds index %d again, repaired from the leader; this voter "
                       "votes and stands for election again", self.path, until)

    @property
    def repairing(self) -> bool:
        """Whether this voter dropped damaged entries that the leader has not sent again yet.
        Until then it must neither grant a vote nor stand for election: entries it lost may be
        committed, and its shortened log could elect (or make it) a leader without them, which
        would lose them for good (Raft's safety assumes a voter keeps what it acknowledged).
        `_KraftSyncObj` enforces it; following the leader and acknowledging entries is safe."""
        return self._meta["repair_until"] is not None

    def clear(self) -> None:
        self._truncate(0)

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        """Drop entries from position `entryFrom` on (a Raft conflict), durably."""
        if entryFrom < len(self._entries):
            self._truncate(max(entryFrom, 0))

    def deleteEntriesTo(self, entryTo: int) -> None:
        """Drop the entries before position `entryTo` (log compaction, after the dump is
        durable): the kept tail goes to a new file renamed over this one."""
        if entryTo <= 0:
            return
        self._rewrite(self._entries[entryTo:])

    def __getitem__(self, item: Any) -> Any:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    def _destroy(self) -> None:
        if self._fd < 0:
            return
        try:
            self.flush()
            self._save_meta()
        finally:
            os.close(self._fd)
            self._fd = -1

    def flush(self) -> None:
        """fsync what `add` wrote; cheap when nothing did. After one failed fsync every later
        flush fails too: the kernel may have dropped the unwritten pages, and a retried fsync
        that succeeds would not bring them back, so the voter stops acknowledging and committing
        (pysyncobj logs each failed tick) until a restart re-reads what the file holds."""
        if self._fsync_error is not None:
            raise self._fsync_error
        if self._dirty:
            fault_injection.before_fsync()
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                logger.critical("raft journal %s: fsync failed (%s); this voter acknowledges, "
                                "commits and votes for nothing more, and resigns the leadership: "
                                "repair the disk, then restart it", self.path, exc)
                self._fsync_error = exc
                raise
            self._dirty = False

    def keep_matching_from(self, idx: int) -> None:
        """Replaces pysyncobj's delete of every entry after an AppendEntries' prevLogIdx (see
        `_keep_matching_entries`): the message's entries from Raft index `idx` on that this
        journal already holds are kept, the first conflicting one truncates. Lasts until the
        message is handled (pysyncobj ends every AppendEntries with `setRaftCommitIndex`)."""
        self._matching_from = idx

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        # pysyncobj applies (and answers proposals) right after raising the commit index: the
        # entries must be durable first. The index itself is saved once a second.
        self._matching_from = None
        self.flush()
        if raftCommitIndex != self._meta["commit_index"]:
            self._meta["commit_index"] = raftCommitIndex
            self._meta_saved = False

    def getRaftCommitIndex(self) -> int:
        return self._meta["commit_index"]

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        # Raft: durable before any message reflecting them (vote request or grant) is sent.
        self._meta["current_term"] = term
        self._meta["voted_for"] = votedForNodeId
        self._meta_saved = False
        self._save_meta()

    def getCurrentTerm(self) -> int:
        return self._meta["current_term"]

    def getVotedForNodeId(self) -> Any:
        return self._meta["voted_for"]

    def onOneSecondTimer(self) -> None:
        # Only the commit index can be unsaved here (term and vote are saved at once), and it is
        # a hint: a save that failed (a full disk) is tried again next second, not raised into
        # pysyncobj's tick, which would skip the rest of it.
        try:
            self._save_meta()
        except OSError:
            pass  # logged and kept in storage_error by _save_meta
        self.probe()

    def probe(self) -> None:
        """After a failed append, with nothing to append meanwhile: whether the disk takes a
        write again (a small file next to the journal, written, synced and removed). Success
        ends the append failure; a failed fsync stays (see `flush`)."""
        if self._append_error is None:
            return
        probe = self.path.with_name(self.path.name + ".probe")
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, MAGIC)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            return
        finally:
            probe.unlink(missing_ok=True)
        logger.warning("raft journal %s: the disk takes writes again (appends failed with: %s)",
                       self.path, self._append_error)
        self._append_error = None

    @property
    def storage_error(self) -> str | None:
        """Why this voter's metadata log cannot be written now (None: the last writes
        succeeded). A failed fsync stays until a restart (see `flush`)."""
        error = self._fsync_error or self._append_error or self._meta_error
        return None if error is None else str(error)

    # -- storage ----------------------------------------------------------------------------

    def _load(self, dump: tuple[Entry, Entry] | None) -> None:
        """Reads the journal by the scan rule (`kraft.log.scan`): a torn tail (an invalid
        suffix) is cut; damage with valid entries after it is handled by `_handle_rot`."""
        if not self.path.exists():
            self._rewrite([])
            return
        data = self.path.read_bytes()
        if data[:len(MAGIC)] != MAGIC:
            raise JournalFormatError(f"{self.path} is not a kraft Raft journal")
        entries: list[Entry] = []
        starts: list[int] = []
        end, problem, last_after = len(data), None, None
        for event in scan(lambda p, n: data[p:p + n], len(data), _FRAMING, position=len(MAGIC)):
            if problem is None:
                if isinstance(event, Frame) and (not entries or event.first_offset == entries[-1][1] + 1):
                    entries.append(event.item)
                    starts.append(event.position)
                    continue
                end = event.position
                problem = (f"index {event.first_offset} after index {entries[-1][1]}"
                           if isinstance(event, Frame) else event.reason)
            if isinstance(event, Frame):
                last_after = event.first_offset if last_after is None else max(last_after, event.first_offset)
        self._entries, self._starts, self._size = entries, starts, end
        if problem is not None and last_after is not None:
            self._handle_rot(data, problem, last_after, dump)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        if problem is not None:
            if last_after is None:
                logger.warning("raft journal %s: torn entry at byte %d (%s); truncating the %d "
                               "bytes from there (the journal now ends at index %s)", self.path,
                               end, problem, len(data) - end, entries[-1][1] if entries else None)
            os.ftruncate(self._fd, end)
            os.fsync(self._fd)

    def _handle_rot(self, data: bytes, problem: str, last_after: int,
                    dump: tuple[Entry, Entry] | None) -> None:
        """Damage at byte `self._size` with valid entries after it, up to index `last_after`.
        Entries the dump covers are not lost. Otherwise, by `on_rot`: a voter with peers drops
        the journal from the damage and marks itself repairing (durably, before the cut) until
        the leader has sent index `last_after` again; a lone voter refuses to open (nobody can
        send the entries again), or with "truncate" drops them knowingly."""
        end = self._size
        first_lost = self._entries[-1][1] + 1 if self._entries else None
        where = (f"raft journal {self.path}: damaged at byte {end} of {len(data)} ({problem}), "
                 f"and valid entries follow up to index {last_after}")
        if dump is not None and last_after <= dump[0][1]:
            logger.warning("%s; the snapshot holds them (index %d): dropping the journal from "
                           "there", where, dump[0][1])
        elif self.on_rot == "repair":
            self._start_repair(last_after)
            logger.error("%s: dropping the journal from index %s on; the leader sends the "
                         "entries again. Until this voter holds index %d again it neither votes "
                         "nor stands for election (a lost entry may be committed). Check the "
                         "disk", where, first_lost, last_after)
        elif self.on_rot == "fail":
            raise MetadataLogCorruptError(
                f"{where}: the entries from index {first_lost} on cannot be replayed, and this "
                f"voter has no peer to send them again. Restore {self.path.parent} from a "
                f"backup, or start once with --override metadata.log.recovery=truncate to drop "
                f"them (what they created, topics included, is forgotten). See "
                f"docs/operations.md, 'A corrupt metadata log'")
        else:
            logger.error("%s; metadata.log.recovery=truncate: dropping the entries from index %s "
                         "on", where, first_lost)

    def _start_repair(self, until: int) -> None:
        """Durably, before anything is dropped: a restart mid-repair must not vote either."""
        current = self._meta["repair_until"]
        self._meta["repair_until"] = until if current is None else max(current, until)
        self._meta_saved = False
        self._save_meta()

    def _truncate(self, position: int) -> None:
        size = self._starts[position] if position < len(self._entries) else self._size
        os.ftruncate(self._fd, size)
        os.fsync(self._fd)
        del self._entries[position:], self._starts[position:]
        self._size = size
        self._dirty = False

    def _rewrite(self, entries: list[Entry]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        chunks, starts, size = [MAGIC], [], len(MAGIC)
        for command, idx, term in entries:
            payload = _ENTRY.pack(idx, term) + command
            chunks.append(_FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload)
            starts.append(size)
            size += _FRAME.size + len(payload)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, b"".join(chunks))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._entries, self._starts, self._size = list(entries), starts, size
        self._dirty = False

    def _read_meta(self) -> dict[str, Any]:
        try:
            meta = json.loads(self._meta_path.read_bytes())
        except FileNotFoundError:
            return {}
        except ValueError as exc:  # replaced atomically, so only outside damage gets here
            logger.error("raft journal meta %s unreadable (%s); starting from term 0 without a "
                         "vote", self._meta_path, exc)
            return {}
        return {key: meta[key] for key in ("current_term", "voted_for", "commit_index", "repair_until")
                if key in meta}

    def _save_meta(self) -> None:
        if self._meta_saved:
            return
        tmp = self._meta_path.with_name(self._meta_path.name + ".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, json.dumps(self._meta).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self._meta_path)
            fsync_dir(self._meta_path.parent)
        except OSError as exc:
            tmp.unlink(missing_ok=True)  # a partial file only holds space a full disk needs
            if self._meta_error is None:
                logger.error("raft journal meta %s: save failed: %s; retried every second (a "
                             "vote or a new term waits for it)", self._meta_path, exc)
            self._meta_error = exc
            raise
        if self._meta_error is not None:
            logger.warning("raft journal meta %s: saved again (it failed with: %s)",
                           self._meta_path, self._meta_error)
            self._meta_error = None
        self._meta_saved = True

    def _reconcile_with_dump(self, last: Entry, before_last: Entry) -> None:
        first = self._entries[0][1] if self._entries else None
        position = before_last[1] - first if first is not None else -1
        if (0 <= position < len(self._entries) - 1 and self._entries[position] == before_last
                and self._entries[position + 1] == last):
            if position > 0:
                logger.info("raft journal %s starts at index %d, before the dump's index %d "
                            "(log compaction was interrupted); dropping the %d entries the dump "
                            "covers", self.path, first, before_last[1], position)
                self.deleteEntriesTo(position)
            return
        logger.warning("raft journal %s (indices %s-%s) does not hold the dump's last entries "
                       "(index %d, term %d): the Raft log restarts from the dump", self.path,
                       first, self._entries[-1][1] if self._entries else None, last[1], last[2])

    def _import_legacy(self, legacy_file: Path) -> None:
        """Entries, term, vote and commit index of a pysyncobj `FileJournal` (kraft before its
        own journal), written to this journal before the old files are deleted."""
        legacy = pysyncobj.journal.FileJournal(str(legacy_file))
        try:
            entries = [(pysyncobj.journal.to_bytes(c), i, t) for c, i, t in
                       (legacy[n] for n in range(len(legacy)))]
            self._meta.update(current_term=legacy.getCurrentTerm(),
                              voted_for=legacy.getVotedForNodeId(),
                              commit_index=legacy.getRaftCommitIndex())
        finally:
            legacy._destroy()
        self._meta_saved = False
        self._save_meta()
        self._rewrite(entries)
        os.close(self._fd)
        self._fd = -1
        logger.info("raft journal %s: imported %d entries from pysyncobj's journal %s",
                    self.path, len(entries), legacy_file)


def _read_dump_tail(dump_file: Path) -> tuple[Entry, Entry] | None:
    """The dump's (last entry, entry before it), as pysyncobj's serializer stores them."""
    try:
        with open(dump_file, "rb") as f, gzip.GzipFile(fileobj=f) as g:
            dump = syncobj_pickle.load(g)
        return dump[1], dump[2]
    except Exception:
        logger.exception("raft journal: cannot read the dump %s to line the journal up with it",
                         dump_file)
        return None


class _JournalFraming(CrcFraming):
    """The journal's entries for the scan rule: the payload is `[u64 index][u64 term]` and the
    command. No marker byte: every position whose length fits and whose index is not below the
    expected one is a candidate."""

    def __init__(self) -> None:
        super().__init__(_FRAME, _ENTRY.size, MAX_ENTRY_BYTES, _FRAME.size + _ENTRY.size)

    def check(self, buf: bytes, off: int, position: int, expected: int) -> Frame:
        payload = self.payload(buf, off)
        size = _FRAME.size + len(payload)
        idx, term = _ENTRY.unpack_from(payload)
        if idx < expected:
            raise BadOffsetsError(f"index {idx} below {expected}", size=size, span=1,
                                  next_offset=idx + 1, overlaps=True)
        return Frame(position, size, idx, idx + 1, (bytes(payload[_ENTRY.size:]), idx, term))

    def candidates(self, buf: bytes, stop: int) -> Iterator[int]:
        return iter(range(stop))

    def plausible(self, buf: bytes, off: int, expected: int, room: int) -> bool:
        return self.length_fits(buf, off, room) and _ENTRY.unpack_from(buf, off + _FRAME.size)[0] >= expected


_FRAMING = _JournalFraming()


def _write_all(fd: int, data: bytes) -> None:
    fault_injection.before_write()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_forked_from: int | None = None  # in a forked process (pysyncobj's dump writer): its parent


def _record_parent() -> None:
    global _forked_from
    _forked_from = os.getppid()


os.register_at_fork(after_in_child=_record_parent)


def durable_replace(source: str, target: str) -> None:
    """pysyncobj's dump install (its own dump, or one received from the leader): fsync the
    temporary file, rename it, fsync the directory, so a dump is whole and durable before
    pysyncobj trims the journal after it.

    pysyncobj writes its own dumps in a forked child. A child whose node has died (kill -9:
    it was reparented) installs nothing: the node may be starting again meanwhile, and a dump
    changing between its journal's reconciliation and pysyncobj's load makes pysyncobj clear
    the journal, losing committed entries (`RaftQuorum.close` waits for the child likewise)."""
    if _forked_from is not None and os.getppid() != _forked_from:
        raise RuntimeError(f"the node that wrote the dump {source} is gone: not installing it")
    fd = os.open(source, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(source, target)
    fsync_dir(Path(target).parent)


_pysyncobj_create_journal = pysyncobj.journal.createJournal


def _create_journal(journalFile: Any = None) -> Any:
    if isinstance(journalFile, RaftJournal):
        return journalFile
    return _pysyncobj_create_journal(journalFile)


_pysyncobj_delete_entries_from = pysyncobj.syncobj.SyncObj._SyncObj__deleteEntriesFrom  # type: ignore[attr-defined]


def _keep_matching_entries(syncobj: pysyncobj.syncobj.SyncObj, fromIDx: int) -> None:
    """pysyncobj's follower (its only caller) deletes every entry after an AppendEntries'
    prevLogIdx before adding the message's entries, even entries it already holds: a delayed or
    repeated AppendEntries then cut entries this voter had acknowledged, which the leader may have
    counted toward a commit (pysyncobj logs "truncating already-applied log entries"). Raft
    deletes only from the first conflicting entry; `RaftJournal.add` does that instead."""
    journal = syncobj._SyncObj__raftLog  # type: ignore[attr-defined]
    if isinstance(journal, RaftJournal):
        journal.keep_matching_from(fromIDx)
    else:
        _pysyncobj_delete_entries_from(syncobj, fromIDx)


# The places pysyncobj is patched. `SyncObj.__init__` builds its journal with the module-level
# `createJournal(conf.journalFile)` (a subclass cannot override a global lookup), so an opened
# `RaftJournal` passed as `journalFile` is handed over as is; any other value still gets
# pysyncobj's journal. The serializer installs dumps with a bare rename: `durable_replace` makes
# that rename durable. A follower's AppendEntries keeps the entries it holds (above). The
# connections are `raft_transport`'s.
pysyncobj.syncobj.createJournal = _create_journal
pysyncobj.serializer.atomicReplace = durable_replace
pysyncobj.syncobj.SyncObj._SyncObj__deleteEntriesFrom = _keep_matching_entries  # type: ignore[attr-defined]

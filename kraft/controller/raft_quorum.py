"""`RaftQuorum`: the controller quorum on pysyncobj, bridged to asyncio (design.md §3).

It owns the pysyncobj `SyncObj` of this voter, the single replicated `apply(batch)` (which folds
batches into `raft_state.MetadataLogState`), the controller claim made after every Raft election,
and the bridge that hands committed records and installed snapshots to the event loop in log
order. It does not validate metadata requests: the controller service does, then proposes.

Threads: pysyncobj ticks, applies and snapshots in its own thread; everything public here is
called on the event loop. The Raft thread reaches the loop only via `call_soon_threadsafe`, so
callbacks run in log order, and a proposal is answered after its records were delivered.

A voter that cannot write its journal (design.md §3: `apply` never raises, so the failure is met
before it): the leader's append of a command fails with `JournalAppendError` and nothing of it is
stored; `_KraftSyncObj` answers that command at once with `JOURNAL_WRITE_FAILED`, which `propose`
raises as `MetadataStorageError` (KAFKA_STORAGE_ERROR, retriable), and `storage_error` says why.
pysyncobj itself would log the error from its tick and drop the command, leaving the proposer to
time out. While `storage_error` is set (an append, an fsync or the term/vote file failed) the
voter stands aside: a leader resigns (handing the leadership to its most caught-up follower,
which campaigns at once), and it neither campaigns nor grants votes, so the voters that can write
elect a leader among themselves and metadata writes resume there. The journal clears an append
failure at the first write that succeeds (an append from the new leader, or its once-a-second
probe), and the voter takes part again, without a restart; a failed fsync needs one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.config import FAIL_REASON
from pysyncobj.fast_queue import FastQueue
from pysyncobj.syncobj import SyncObjException, _RAFT_STATE

from kraft.cluster_identity import ClusterIdentity, InconsistentClusterIdError
from kraft.config import ConfigError, parse_host_port
from kraft.controller.errors import ControllerError, InvalidBatchError, MetadataStorageError, NotControllerError
from kraft.controller.quorum import BatchCallback, CommitCallback, SnapshotCallback, stamp_proposal
from kraft.controller.raft_journal import JournalAppendError, RaftJournal
from kraft.controller.raft_state import (
    BatchOutcome,
    MetadataImageMachine,
    MetadataLogState,
    PendingImage,
    StateMachine,
    apply_batch,
    apply_endpoint,
    claim_record,
)
from kraft.controller.raft_transport import RaftChannelCounts, RaftTransport
from kraft.metrics import NULL_METRICS, MetricsSink

logger = logging.getLogger(__name__)

METADATA_DIR = "__cluster_metadata-0"
SECRET_FILE = "controller-quorum.secret"
DEFAULT_CONTROLLER_ADDRESS = ("127.0.0.1", 9093)
JOURNAL_FILE = "raft-journal.log"
DUMP_FILE = "raft.snapshot"
LEGACY_JOURNAL_FILE = "raft.journal"  # pysyncobj's FileJournal, imported once
# A failure code of our own beside pysyncobj's FAIL_REASON values (0-7): the leader could not
# append the command to its journal, so it was not replicated and will never be applied.
JOURNAL_WRITE_FAILED = 100
CLUSTER_ID_FIELD = "cluster_id"  # in every Raft message of a voter that knows its cluster id


class QuorumTimeoutError(ControllerError):
    """The outcome of a proposal is unknown (timeout, leader change); a retry with the same
    request id is harmless: the replicated state applies a request once."""

    error_code = "REQUEST_TIMED_OUT"


@dataclass(frozen=True)
class RaftQuorumConfig:
    """One voter's settings. Timings are design.md §3's measured values."""

    node_id: int
    voters: Mapping[int, tuple[str, int]]
    data_dir: Path
    secret: str
    bind_address: tuple[str, int] | None = None  # the controller listener; default: own voter entry
    raft_min_timeout: float = 0.3
    raft_max_timeout: float = 0.6
    append_entries_period: float = 0.05
    auto_tick_period: float = 0.02
    leader_fallback_timeout: float = 1.0
    connection_timeout: float = 10**6
    connection_retry_time: float = 0.5
    log_compaction_min_entries: int = 10_000
    # Snapshots by size and time as well: an entry is one request's batch (up to 100k records),
    # so an entry count alone lets the journal grow without bound.
    log_compaction_min_records: int = 200_000
    log_compaction_min_time: float = 300.0
    request_timeout: float = 5.0
    max_inflight_proposals: int = 1_000
    log_recovery: str = "fail"  # metadata.log.recovery, for a lone voter (see RaftQuorum.start)

    def __post_init__(self) -> None:
        if self.node_id not in self.voters:
            raise ConfigError("controller.quorum.voters",
                              f"node {self.node_id} is not among the voters {sorted(self.voters)}")
        if not self.secret:
            raise ConfigError("controller.quorum.secret",
                              "the controller quorum needs a shared secret")

    @classmethod
    def from_kraft_config(cls, config: Any, secret: str, **overrides: Any) -> "RaftQuorumConfig":
        """From a `kraft.config.KraftConfig` (its voters, data dir, controller listener)."""
        listener = config["controller.listeners"]
        bind = parse_host_port(listener) if listener else None
        # A lone node without a quorum list is its own single voter.
        voters = config.voters or {config.node_id: bind or DEFAULT_CONTROLLER_ADDRESS}
        return cls(node_id=config.node_id, voters=voters, data_dir=config.data_dir, secret=secret,
                   bind_address=bind, log_recovery=config["metadata.log.recovery"], **overrides)

    @property
    def metadata_dir(self) -> Path:
        return Path(self.data_dir) / METADATA_DIR


def read_secret_file(path: str | Path) -> str:
    """controller.quorum.secret.file's secret; ConfigError when it cannot be read or is empty."""
    path = Path(path)
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ConfigError("controller.quorum.secret.file", f"cannot read {path}: {e.strerror}") from None
    if not secret:
        raise ConfigError("controller.quorum.secret.file", f"{path} is empty")
    warn_if_open_to_others(path)
    return secret


def warn_if_open_to_others(path: Path) -> None:
    """A secret file other users may read or write is used, with a warning, as ssh warns of a
    private key with open permissions (refusing would stop a running cluster's restart)."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        logger.warning("secret file %s is accessible to other users (mode %04o): chmod 600 %s", path, mode, path)


def resolve_secret(configured: str | None, data_dir: Path, voter_count: int) -> str:
    """The quorum secret: the configured one; for a lone voter without one, a random secret kept
    in the data dir (mode 0600) so restarts reuse it. Several voters must share a configured one."""
    if configured:
        return configured
    if voter_count > 1:
        raise ConfigError("controller.quorum.secret", "required with more than one voter")
    path = Path(data_dir) / SECRET_FILE
    if path.exists():
        secret = path.read_text(encoding="utf-8").strip()
        if secret:
            warn_if_open_to_others(path)
            return secret
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(secret + "\n")
    return secret


@dataclass(frozen=True)
class VoterStatus:
    """One voter as the leader sees it (followers know only their own row)."""

    node_id: int
    log_end_offset: int  # Raft log index replicated to that voter (-1 when unknown)
    lag: int  # leader's log end minus log_end_offset (-1 when unknown)
    connected: bool
    status: str  # "Leader" or "Follower"


@dataclass(frozen=True)
class QuorumStatus:
    """What `kraft metadata-quorum describe --status/--replication` prints, in Raft log indices
    (HighWatermark = commit index); `metadata_offset` is the last metadata offset delivered here."""

    node_id: int
    raft_state: str  # "Leader", "Candidate" or "Follower"
    leader_id: int | None
    leader_epoch: int  # the Raft term
    high_watermark: int
    last_applied_index: int
    metadata_offset: int
    active_controller_id: int | None
    controller_epoch: int
    has_quorum: bool
    voters: tuple[VoterStatus, ...]
    # the leader's commit index as this node last learned it (-1: none yet); unlike
    # high_watermark, never capped at this node's own log end, so it tells how far behind it is
    leader_commit_index: int = -1
    voted_id: int | None = None  # the voter this one voted for in the current term

    @property
    def max_follower_lag(self) -> int:
        return max((v.lag for v in self.voters if v.status == "Follower"), default=0)


_RAFT_STATE_NAMES = {_RAFT_STATE.LEADER: "Leader", _RAFT_STATE.CANDIDATE: "Candidate",
                     _RAFT_STATE.FOLLOWER: "Follower"}


class _CommandQueue(FastQueue):
    """pysyncobj's queue of commands waiting for the leader's journal; remembers the one taken
    last (only the Raft thread takes), so the command whose append failed can be answered."""

    last_taken: Any = None

    def get_nowait(self) -> Any:
        item = super().get_nowait()
        self.last_taken = item
        return item


class _ClusterIdTransport(RaftTransport):
    """Every Raft message carries the sender's cluster id once it knows one, as every KRaft RPC
    does (KIP-595's ClusterId); a message of another cluster is dropped before pysyncobj reads it
    (a vote request or a log from an old cluster's data directory must not reach this quorum's
    state) and handed to the SyncObj's `foreign_message`."""

    def send(self, node: Any, message: Any) -> bool:
        cluster_id = self._syncObj.cluster_id()
        if cluster_id is not None and isinstance(message, dict):
            message = {**message, CLUSTER_ID_FIELD: cluster_id}
        return super().send(node, message)

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        theirs = message.get(CLUSTER_ID_FIELD) if isinstance(message, dict) else None
        ours = self._syncObj.cluster_id()
        if theirs is not None and ours is not None and theirs != ours:
            self._syncObj.foreign_message(node, message, theirs)
            return
        super()._onMessageReceived(node, message)


class _KraftSyncObj(SyncObj):
    """pysyncobj's SyncObj, answering a command its journal could not store (see the module
    docstring) instead of dropping it; standing aside (no leadership, no votes) while its journal
    cannot be written; keeping a voter whose journal is repairing (it dropped damaged entries,
    `RaftJournal.repairing`) out of elections: it grants no vote and never becomes a candidate
    until the leader has sent the entries again; and sending the leader's entries and commit
    index when they change rather than at the next `appendEntriesPeriod`. `cluster_id()` and
    `foreign_message` serve `_ClusterIdTransport` (Raft thread).

    With `appendEntriesUseBatch` pysyncobj appends the commands of a tick to its log and sends
    them only at the next period (50 ms), and followers learn that an entry committed only at
    the period after that: a standby controller, and the broker on its node, saw a metadata
    change up to 50 ms after the active controller answered it (KRaft's followers learn a
    commit from a fetch answered as the high watermark moves). Each tick that appended commands
    or advanced the commit index now ends with one AppendEntries carrying all of it: the
    batching of a tick's commands stays, the wait for the timer goes."""

    def __init__(self, *args: Any, cluster_id: Callable[[], str | None] = lambda: None,
                 foreign_message: Callable[[Any, Any, str], None] = lambda node, message, theirs: None,
                 **kwargs: Any) -> None:
        self._standing_aside = False  # before the first tick: the constructor may start the thread
        self.cluster_id = cluster_id
        self.foreign_message = foreign_message
        super().__init__(*args, **kwargs)
        # No command is queued before the constructor returns: swapping the queue loses none.
        self._SyncObj__commandsQueue = _CommandQueue(self.conf.commandsQueueSize)
        self._sent_position = (-1, -1)  # (log index, commit index) the followers were last sent

    def wait_for_dump_writer(self) -> None:
        """Blocks until the dump writer pysyncobj forked (it serializes in a child process) has
        exited; called once the tick thread stopped. A writer that outlived `close` installed its
        dump while the next start ran: between the journal lining itself up with the dump on
        disk and pysyncobj loading the dump (its first tick after binding), so pysyncobj found
        the journal not starting at the dump's entries, cleared it and lost the committed
        entries after the dump ("raftCommitIndex exceeds journal end after loading dump")."""
        serializer = self._SyncObj__serializer
        pid = serializer._Serializer__pid
        if pid > 0:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # reaped by pysyncobj's last tick
                pass
            serializer._Serializer__pid = 0

    def destroy_and_wait(self) -> None:
        """Stops the tick thread, then waits for the dump writer (blocking)."""
        self.destroy_synchronous()
        self.wait_for_dump_writer()

    def _journal(self) -> RaftJournal | None:
        journal = self._SyncObj__raftLog
        return journal if isinstance(journal, RaftJournal) else None

    def _storage_error(self) -> str | None:
        journal = self._journal()
        return None if journal is None else journal.storage_error

    def _stand_aside(self, error: str) -> None:
        """No leadership and no candidacy while the journal cannot be written."""
        if not self._standing_aside:
            self._standing_aside = True
            logger.error("controller quorum voter %s cannot write its metadata log (%s): it resigns "
                         "any leadership and neither campaigns nor votes until a write succeeds",
                         self.selfNode, error)
        if self._isLeader():
            try:
                self.transferLeadership()  # a caught-up follower campaigns at once
            except Exception:  # e.g. the send's fsync failed: the followers time out instead
                logger.debug("leadership transfer not sent", exc_info=True)
            self._SyncObj__setState(_RAFT_STATE.FOLLOWER)
            self._SyncObj__raftLeader = None
        self._SyncObj__raftElectionDeadline = time.monotonic() + self.conf.raftMaxTimeout

    def _checkCommandsToApply(self) -> None:
        try:
            self._check_commands()
        finally:
            if self._SyncObj__raftState == _RAFT_STATE.LEADER:
                position = (self._SyncObj__getCurrentLogIndex(), self._SyncObj__raftCommitIndex)
                if position != self._sent_position:
                    self._sent_position = position
                    self._SyncObj__sendAppendEntries()

    def _check_commands(self) -> None:
        try:
            super()._checkCommandsToApply()
        except JournalAppendError:
            # Raised by the leader's `journal.add` right after the command was taken: it holds
            # no index, nobody waits on one. Answer it; the rest of the queue waits for the next
            # tick (each of its commands tries the disk again).
            _command, callback = self._SyncObj__commandsQueue.last_taken
            try:
                self._SyncObj__callErrCallback(JOURNAL_WRITE_FAILED, callback)
            except Exception:  # a forwarded command's answer could not be sent: it times out
                logger.exception("could not answer a command the journal refused")

    def _repairing(self) -> bool:
        journal = self._journal()
        return journal is not None and journal.repairing

    def _onTick(self, timeToWait: float = 0.0) -> None:
        error = self._storage_error()
        if error is not None:
            self._stand_aside(error)
        elif self._standing_aside:
            self._standing_aside = False
            logger.warning("controller quorum voter %s: its metadata log is writable again; it votes "
                           "and may lead again", self.selfNode)
        if self._repairing():
            # no candidacy while the journal lacks entries it had acknowledged (RaftJournal.
            # repairing): keep the election deadline ahead of every tick
            self._SyncObj__raftElectionDeadline = time.monotonic() + self.conf.raftMaxTimeout
        super()._onTick(timeToWait)

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        if isinstance(message, dict):
            kind = message.get("type")
            if self._standing_aside and kind in ("request_vote", "timeout_now"):
                return  # a voter that cannot write a vote or a log does not take part in elections
            if kind == "request_vote" and self._repairing():
                return  # no vote either: dropped, as a lost message (Raft copes with those)
        try:
            super()._SyncObj__onMessageReceived(node, message)
        except JournalAppendError:
            # A follower that cannot store the leader's entries does not acknowledge them; the
            # leader sends them again. The journal logged the failure (storage_error has it).
            pass


class _MetadataLog(SyncObjConsumer):
    """The replicated object: one `MetadataLogState`, changed only by `apply`.

    `listener` is told (in the Raft thread) about every applied batch and installed snapshot.
    """

    def __init__(self, machine: StateMachine, listener: "RaftQuorum") -> None:
        super().__init__()
        self._machine = machine
        self._listener = listener
        self._state = MetadataLogState(app_state=machine.initial_state())

    @replicated
    def apply(self, batch: Any) -> BatchOutcome:
        # Never raises: an exception here would stop this voter from applying anything more.
        outcome = apply_batch(self._state, batch, self._machine)
        if outcome.applied:
            try:
                self._listener._raft_applied(batch, outcome)
            except Exception:
                logger.exception("could not hand offsets %d-%d to the event loop",
                                 outcome.first_offset, outcome.last_offset)
        return outcome

    @replicated
    def announce(self, node_id: Any, host: Any, port: Any) -> bool:
        """A voter's client endpoint (not a metadata record: no offset, no controller epoch)."""
        changed = apply_endpoint(self._state, node_id, host, port)
        if changed:
            try:
                self._listener._raft_endpoints(dict(self._state.controller_endpoints))
            except Exception:
                logger.exception("could not hand the controller endpoints to the event loop")
        return changed

    def _serialize(self) -> dict[str, Any]:
        return {"state": self._state}

    def _deserialize(self, data: dict[str, Any]) -> None:
        # pysyncobj installs a snapshot (from the leader or the dump file at restart) without
        # per-record calls: consumers must rebuild from the state at its offset.
        state = data.get("state") if isinstance(data, dict) else None
        if not isinstance(state, MetadataLogState):  # a dump from another version
            logger.error("snapshot without a metadata log state (%s); ignored", type(state).__name__)
            return
        self._state = state
        try:
            self._listener._raft_snapshot_installed(state)
        except Exception:
            logger.exception("could not hand the snapshot at offset %d to the event loop", state.offset)


class RaftQuorum:
    """A voter of the controller quorum. See the module docstring for threads and ordering."""

    def __init__(self, config: RaftQuorumConfig, machine: StateMachine | None = None,
                 identity: ClusterIdentity | None = None) -> None:
        """`machine` folds batches into the state snapshots carry (default: the MetadataImage);
        `identity`: this node's cluster id, which its claims propose and its Raft messages carry
        (none: claims name no cluster, messages carry none)."""
        self.config = config
        self._identity = identity
        self._foreign: set[tuple[int | None, str]] = set()  # (voter, cluster) dropped, logged once; Raft thread
        self._refused = False  # the quorum's leader is of another cluster
        self.node_id = config.node_id
        self._addresses = {nid: f"{host}:{port}" for nid, (host, port) in config.voters.items()}
        self._node_ids = {addr: nid for nid, addr in self._addresses.items()}
        self._log = _MetadataLog(machine or MetadataImageMachine(), self)
        self._syncobj: SyncObj | None = None
        self._journal: RaftJournal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._commit_callbacks: list[CommitCallback] = []
        self._batch_callbacks: list[BatchCallback] = []
        self._snapshot_callbacks: list[SnapshotCallback] = []
        self._inflight = asyncio.Semaphore(config.max_inflight_proposals)
        self._pending: set[asyncio.Future] = set()
        self._claim_task: asyncio.Task | None = None
        self._closed = False
        self.metrics: MetricsSink = NULL_METRICS  # commit and election latency
        # The loop's view of the log: it trails the Raft thread by the callbacks in flight.
        self._metadata_offset = -1
        self._controller: tuple[int, int] | None = None  # (node_id, epoch)
        self._endpoints: dict[int, tuple[str, int]] = {}  # voters' client endpoints, loop copy
        self._client_endpoint: tuple[str, int] | None = None
        self._announce_task: asyncio.Task | None = None
        self._active_term: int | None = None  # Raft term in which our own claim was applied
        self._records_since_compaction = 0  # Raft thread only

    # -- registration and lifecycle ---------------------------------------------------------

    def on_commit(self, callback: CommitCallback) -> None:
        """`callback(offset, record)` on the loop for every applied record, in offset order."""
        self._commit_callbacks.append(callback)

    def on_commit_batch(self, callback: BatchCallback) -> None:
        """`callback(entries)` on the loop for every applied batch (its (offset, record) list)."""
        self._batch_callbacks.append(callback)

    def on_snapshot(self, callback: SnapshotCallback) -> None:
        """`callback(offset, state)` on the loop when a snapshot replaced the state wholesale:
        `state` is the `StateMachine` value at metadata offset `offset` (the metadata image's is
        handed over as a function building the image, to be run off the loop); records after it
        follow through `on_commit`. Rebuild the image from it rather than expecting the missed
        records."""
        self._snapshot_callbacks.append(callback)

    async def start(self) -> None:
        """Binds the controller listener and joins the quorum. Call on the loop of the thread that
        lives as long as the quorum (pysyncobj's tick thread stops when its creator thread ends)."""
        assert self._syncobj is None, "already started"
        self._loop = asyncio.get_running_loop()
        metadata_dir = self.config.metadata_dir
        metadata_dir.mkdir(parents=True, exist_ok=True)
        # damage with valid entries after it: a voter with peers gets them back from the leader
        # (the journal repairs), a lone voter has nobody to ask (see RaftJournal._handle_rot)
        on_rot = "repair" if len(self._addresses) > 1 else self.config.log_recovery
        journal = await asyncio.to_thread(
            RaftJournal, metadata_dir / JOURNAL_FILE, dump_file=metadata_dir / DUMP_FILE,
            legacy_file=metadata_dir / LEGACY_JOURNAL_FILE, on_rot=on_rot)
        self_address = self._addresses[self.node_id]
        bind = self.config.bind_address
        conf = SyncObjConf(
            password=self.config.secret,
            bindAddress=f"{bind[0]}:{bind[1]}" if bind else self_address,
            raftMinTimeout=self.config.raft_min_timeout,
            raftMaxTimeout=self.config.raft_max_timeout,
            appendEntriesPeriod=self.config.append_entries_period,
            autoTickPeriod=self.config.auto_tick_period,
            leaderFallbackTimeout=self.config.leader_fallback_timeout,
            connectionTimeout=self.config.connection_timeout,
            connectionRetryTime=self.config.connection_retry_time,
            appendEntriesUseBatch=True,
            journalFile=journal,  # handed to SyncObj as is (raft_journal's createJournal)
            fullDumpFile=str(metadata_dir / DUMP_FILE),
            logCompactionMinEntries=self.config.log_compaction_min_entries,
            logCompactionMinTime=self.config.log_compaction_min_time,
            onStateChanged=self._raft_state_changed,
            bindRetryTime=0.25,
            maxBindRetries=40,
        )
        others = [addr for nid, addr in self._addresses.items() if nid != self.node_id]
        try:
            self._syncobj = _KraftSyncObj(self_address, others, conf, consumers=[self._log],
                                          transportClass=_ClusterIdTransport, cluster_id=self._known_cluster_id,
                                          foreign_message=self._foreign_message)
        except BaseException:
            journal._destroy()
            raise
        self._journal = journal
        try:
            await asyncio.to_thread(self._syncobj.waitBinded)
        except SyncObjException:
            self._syncobj.destroy()
            raise OSError(f"cannot bind the controller listener {conf.bindAddress}") from None
        logger.info("controller quorum voter %d listening on %s, voters %s", self.node_id,
                    conf.bindAddress, self._addresses)
        self._start_announcing()

    async def close(self) -> None:
        self._closed = True
        for task in (self._claim_task, self._announce_task):
            if task is not None:
                task.cancel()
        for future in list(self._pending):
            if not future.done():
                future.set_exception(QuorumTimeoutError("the controller quorum is closing"))
        if self._syncobj is not None:
            await asyncio.to_thread(self._syncobj.destroy_and_wait)

    # -- who leads --------------------------------------------------------------------------

    def leader(self) -> int | None:
        """The Raft leader's node id as this voter knows it (the active controller once it
        claimed), or None during an election."""
        if self._syncobj is None:
            return None
        node = self._syncobj._getLeader()
        return None if node is None else self._node_ids.get(node.id)

    def active_controller(self) -> tuple[int, int] | None:
        """(node_id, controller_epoch) of the last applied claim, as delivered to this loop."""
        return self._controller

    def is_active_controller(self) -> bool:
        """Raft leader *and* our claim of this term applied: `_isLeader()` alone may be a
        deposed leader that has not noticed yet."""
        syncobj = self._syncobj
        return (
            syncobj is not None
            and not self._closed
            and syncobj._isLeader()
            and self._active_term == syncobj.raftCurrentTerm
            and self._controller is not None
            and self._controller[0] == self.node_id
        )

    @property
    def storage_error(self) -> str | None:
        """Why this voter's metadata log (its Raft journal) cannot be written now; None while
        it can. Set by a failed write, cleared by the next one that succeeds."""
        return None if self._journal is None else self._journal.storage_error

    # -- proposals --------------------------------------------------------------------------

    async def propose(self, records: list[dict[str, Any]], request_id: str | None = None) -> int:
        """Commit `records` atomically; returns the metadata offset of the last one once it is
        committed and delivered to `on_commit` here. Records get this controller's epoch, and
        `request_id` where they carry none (default: a new one). Raises NotControllerError,
        QuorumTimeoutError (outcome unknown, retry with the same request id),
        MetadataStorageError (the journal could not store them: nothing committed) or
        InvalidBatchError."""
        if not self.is_active_controller():
            raise NotControllerError(f"node {self.node_id} is not the active controller",
                                     self._redirect_id())
        assert self._controller is not None
        batch = stamp_proposal(records, self._controller[1], request_id, self.node_id)
        started = time.monotonic()
        outcome = await self.submit(batch)
        self.metrics.raft_commit(time.monotonic() - started)
        if outcome.status in ("applied", "duplicate"):
            return outcome.last_offset
        if outcome.status == "fenced":
            raise NotControllerError(outcome.reason, outcome.controller_id)
        raise InvalidBatchError(outcome.reason)

    async def submit(self, batch: list[dict[str, Any]], timeout: float | None = None) -> BatchOutcome:
        """Low level: replicate `batch` as is (no active-controller check, no stamping) and return
        how `apply` treated it. The log still fences it; `propose` is what controllers call."""
        return await self._replicate(self._log.apply, batch, timeout=timeout)

    async def _replicate(self, method: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """Call a @replicated method of the log and wait for its result (any voter may call: a
        follower's pysyncobj forwards the command to the leader)."""
        assert self._syncobj is not None and self._loop is not None, "not started"
        loop = self._loop
        future: asyncio.Future = loop.create_future()

        def resolve(result: Any, error: int) -> None:  # Raft thread
            loop.call_soon_threadsafe(_settle, future, result, error)

        async with self._inflight:
            self._pending.add(future)
            try:
                # pysyncobj honours `timeout=` only for blocking calls; with a callback the wait
                # below enforces it (a discarded entry may never call back).
                method(*args, callback=resolve)
                result, error = await asyncio.wait_for(future, timeout or self.config.request_timeout)
            except asyncio.TimeoutError:
                raise QuorumTimeoutError("no commit within the request timeout; outcome unknown") from None
            finally:
                self._pending.discard(future)
        if error == FAIL_REASON.SUCCESS:
            return result
        if error in (FAIL_REASON.DISCARDED, FAIL_REASON.NOT_LEADER, FAIL_REASON.MISSING_LEADER):
            raise NotControllerError(f"not committed: {_fail_name(error)}", self._redirect_id())
        if error == JOURNAL_WRITE_FAILED:
            # our own journal when we lead; a forwarded command's leader otherwise
            why = self.storage_error or "the Raft leader could not write its journal"
            raise MetadataStorageError(f"metadata log append failed: {why}")
        raise QuorumTimeoutError(f"outcome unknown: {_fail_name(error)}")

    def _redirect_id(self) -> int | None:
        leader = self.leader()
        if leader is not None and leader != self.node_id:
            return leader
        if self._controller is not None and self._controller[0] != self.node_id:
            return self._controller[0]
        return None

    # -- client endpoints -------------------------------------------------------------------

    def announce_endpoint(self, host: str, port: int) -> None:
        """Publish this voter's client listener to every node of the quorum (replicated state,
        so snapshots carry it): how others find the active controller's API."""
        self._client_endpoint = (host, port)
        self._start_announcing()

    def controller_endpoints(self) -> dict[int, tuple[str, int]]:
        """node_id -> (host, port) of the voters' client listeners known so far."""
        return dict(self._endpoints)

    def _start_announcing(self) -> None:
        if (self._syncobj is None or self._client_endpoint is None or self._closed
                or (self._announce_task is not None and not self._announce_task.done())):
            return
        self._announce_task = asyncio.ensure_future(self._announce())

    async def _announce(self) -> None:
        """Replicate our endpoint until the applied state holds it (no leader yet: retry)."""
        while not self._closed and self._endpoints.get(self.node_id) != self._client_endpoint:
            endpoint = self._client_endpoint
            assert endpoint is not None
            try:
                accepted = await self._replicate(self._log.announce, self.node_id, *endpoint)
            except (NotControllerError, QuorumTimeoutError, MetadataStorageError) as exc:
                logger.debug("endpoint announcement not committed yet: %s", exc)
                await asyncio.sleep(self.config.raft_min_timeout)
                continue
            if not accepted:
                logger.error("the quorum refused our client endpoint %s", endpoint)
                return
            await asyncio.sleep(0)  # the delivery was queued before the answer; let it land

    # -- the controller claim ---------------------------------------------------------------

    async def _claim_controller(self, term: int) -> None:
        """Commit ClaimController(me, epoch+1) while we lead in `term`; retried on stale epochs."""
        syncobj = self._syncobj
        assert syncobj is not None
        epoch = self._controller[1] if self._controller else 0
        started = time.monotonic()
        while not self._closed and syncobj._isLeader() and syncobj.raftCurrentTerm == term:
            try:
                proposal = None if self._identity is None else self._identity.proposal()
                outcome = await self.submit([claim_record(self.node_id, epoch + 1, proposal)])
            except (NotControllerError, QuorumTimeoutError) as exc:
                logger.info("controller claim in term %d not committed yet: %s", term, exc)
                await asyncio.sleep(self.config.append_entries_period)
                continue
            except MetadataStorageError as exc:  # a full disk: claim once space is back
                logger.info("controller claim in term %d not written yet: %s", term, exc)
                await asyncio.sleep(self.config.raft_min_timeout)
                continue
            if outcome.applied:
                self._active_term = term
                logger.info("node %d is the active controller (epoch %d, Raft term %d) after "
                            "%.3f s", self.node_id, epoch + 1, term, time.monotonic() - started)
                return
            epoch = max(epoch + 1, outcome.controller_epoch)  # someone claimed first: go above

    # -- the cluster id (Raft thread, then the loop) ----------------------------------------

    def _known_cluster_id(self) -> str | None:
        return None if self._identity is None else self._identity.cluster_id

    def _foreign_message(self, node: Any, message: Any, theirs: str) -> None:
        """A message of another cluster, dropped. From the leader (an AppendEntries) it says the
        quorum is that cluster: this node is the one that does not belong and leaves. Anything
        else is a stray voter's (an old data directory), which the quorum ignores."""
        voter = self._node_ids.get(getattr(node, "id", None))
        if message.get("type") == "append_entries":
            self._call_on_loop(self._refuse_cluster, voter, theirs)
        elif (voter, theirs) not in self._foreign:
            self._foreign.add((voter, theirs))
            logger.warning("dropping Raft messages from voter %s: it is in cluster %s, this quorum in %s "
                           "(INCONSISTENT_CLUSTER_ID)", voter, theirs, self._known_cluster_id())

    def _refuse_cluster(self, voter: int | None, theirs: str) -> None:
        if self._identity is None or self._closed or self._refused:
            return
        self._refused = True  # the leader's messages keep coming until the node has stopped
        try:
            self._identity.check(theirs, f"the controller quorum (its leader, voter {voter})")
        except InconsistentClusterIdError:
            pass  # the identity told the node, which stops

    def _raft_state_changed(self, old: int, new: int) -> None:  # Raft thread
        self._call_on_loop(self._on_raft_state, new)

    def _on_raft_state(self, new: int) -> None:
        if self._closed or self._syncobj is None:
            return
        logger.info("node %d is now Raft %s (term %d)", self.node_id,
                    _RAFT_STATE_NAMES.get(new, new), self._syncobj.raftCurrentTerm)
        self.metrics.raft_state_changed(_RAFT_STATE_NAMES.get(new, str(new)))
        if new == _RAFT_STATE.LEADER:
            if self._claim_task is not None:
                self._claim_task.cancel()
            self._claim_task = asyncio.ensure_future(
                self._claim_controller(self._syncobj.raftCurrentTerm))

    # -- Raft thread -> loop ----------------------------------------------------------------

    def _call_on_loop(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop closed meanwhile: nobody is listening any more
            pass

    def _raft_applied(self, batch: list[dict[str, Any]], outcome: BatchOutcome) -> None:
        self._records_since_compaction += len(batch)
        if self._records_since_compaction >= self.config.log_compaction_min_records and self._syncobj:
            self._records_since_compaction = 0
            self._syncobj.forceLogCompaction()
        controller = (None if outcome.controller_id is None
                      else (outcome.controller_id, outcome.controller_epoch))
        entries = list(zip(range(outcome.first_offset, outcome.last_offset + 1), batch))
        self._call_on_loop(self._deliver, entries, controller)

    def _raft_snapshot_installed(self, state: MetadataLogState) -> None:
        controller = (None if state.controller_id is None
                      else (state.controller_id, state.controller_epoch))
        self._call_on_loop(self._deliver_snapshot, state.offset, controller, state.app_state)
        self._raft_endpoints(dict(getattr(state, "controller_endpoints", None) or {}))

    def _raft_endpoints(self, endpoints: dict[int, tuple[str, int]]) -> None:
        self._call_on_loop(self._deliver_endpoints, endpoints)

    def _deliver_endpoints(self, endpoints: dict[int, tuple[str, int]]) -> None:
        self._endpoints = endpoints

    def _deliver(self, entries: list[tuple[int, dict[str, Any]]],
                 controller: tuple[int, int] | None) -> None:
        self._controller = controller  # only a claim changes it, and a claim travels alone
        for offset, record in entries:
            self._metadata_offset = offset
            for callback in self._commit_callbacks:
                try:
                    callback(offset, record)
                except Exception:  # one consumer's bug must not starve the others
                    logger.exception("on_commit callback failed at offset %d", offset)
        for batch_callback in self._batch_callbacks if entries else ():
            try:
                batch_callback(entries)
            except Exception:
                logger.exception("on_commit_batch callback failed at offsets %d-%d", entries[0][0], entries[-1][0])

    def _deliver_snapshot(self, offset: int, controller: tuple[int, int] | None, state: Any) -> None:
        logger.info("metadata snapshot installed at offset %d", offset)
        if isinstance(state, PendingImage):  # parsed by the consumer off the loop, not on the Raft thread
            state = state.fold
        self._metadata_offset = offset
        self._controller = controller
        for callback in self._snapshot_callbacks:
            try:
                callback(offset, state)
            except Exception:
                logger.exception("on_snapshot callback failed at offset %d", offset)

    def image_folded(self, image: Any) -> None:
        """The loop built the image at `image.offset`: the Raft state may drop the entries it
        covers (see `raft_state.PendingImage`). Any thread."""
        folded = getattr(self._log._machine, "folded", None)
        if folded is not None:
            folded(image)

    # -- status -----------------------------------------------------------------------------

    @property
    def metadata_offset(self) -> int:
        """The last metadata offset delivered to this loop (-1 before any record)."""
        return self._metadata_offset

    @property
    def channel(self) -> RaftChannelCounts | None:
        """This voter's Raft traffic (bytes, messages) since start; None before `start`."""
        syncobj = self._syncobj
        return None if syncobj is None else syncobj._SyncObj__transport.channel

    def status(self) -> QuorumStatus:
        assert self._syncobj is not None, "not started"
        raw = _read_status(self._syncobj)
        state = _RAFT_STATE_NAMES.get(raw["state"], str(raw["state"]))
        leader_node = raw["leader"]
        leader_id = None if leader_node is None else self._node_ids.get(leader_node.id)
        matches = {self._node_ids[key[len("match_idx_server_"):]]: value
                   for key, value in raw.items()
                   if key.startswith("match_idx_server_")
                   and key[len("match_idx_server_"):] in self._node_ids}
        commit = raw["commit_idx"]
        # pysyncobj does not expose the leader's log end; no follower can be past it.
        log_end = max([commit, *matches.values()])
        voters = []
        for nid, address in sorted(self._addresses.items()):
            if nid == self.node_id:
                own_end = log_end if state == "Leader" else raw["last_applied"]
                voters.append(VoterStatus(nid, own_end, 0 if state == "Leader" else -1, True,
                                          "Leader" if state == "Leader" else "Follower"))
                continue
            connected = raw.get(f"partner_node_status_server_{address}", 0) == 2
            if state == "Leader" and nid in matches:
                voters.append(VoterStatus(nid, matches[nid], log_end - matches[nid], connected,
                                          "Follower"))
            else:
                voters.append(VoterStatus(nid, -1, -1, connected,
                                          "Leader" if nid == leader_id else "Follower"))
        controller = self._controller
        return QuorumStatus(
            node_id=self.node_id, raft_state=state, leader_id=leader_id,
            leader_epoch=raw["raft_term"], high_watermark=commit,
            last_applied_index=raw["last_applied"], metadata_offset=self._metadata_offset,
            active_controller_id=controller[0] if controller else None,
            controller_epoch=controller[1] if controller else 0,
            has_quorum=bool(raw["has_quorum"]), voters=tuple(voters),
            leader_commit_index=-1 if raw.get("leader_commit_idx") is None else raw["leader_commit_idx"],
            voted_id=self._node_ids.get(self._syncobj._SyncObj__votedForNodeId),
        )


def _settle(future: asyncio.Future, result: Any, error: int) -> None:
    if not future.done():  # it may have timed out or been failed by close()
        future.set_result((result, error))


def _read_status(syncobj: SyncObj, attempts: int = 5) -> dict[str, Any]:
    """getStatus() iterates dicts the Raft thread mutates; a rare concurrent change is retried."""
    for _ in range(attempts - 1):
        try:
            return syncobj.getStatus()
        except RuntimeError:
            continue
    return syncobj.getStatus()


def _fail_name(code: int) -> str:
    names = {v: k for k, v in vars(FAIL_REASON).items() if k.isupper()}
    names[JOURNAL_WRITE_FAILED] = "JOURNAL_WRITE_FAILED"
    return names.get(code, str(code))

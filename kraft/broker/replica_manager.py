"""The broker's replica manager: the local partition logs and produce / fetch / offsets on them.

It is a metadata publisher: every image update is reconciled against the local replicas (create
the log of a partition this broker now leads or follows, delete the log of a removed topic) and
each replica's role is applied from the registration by its sans-I/O core
(`kraft/broker/replication/partition.py`: Kafka's makeLeader / makeFollower, epoch checks, the
leader's and the follower's side of a fetch, ISR changes), and this shell performs the actions the
core returns (start / stop a fetcher, send an AlterPartition, wake waiters). Blocking file work (open with
recovery, flush, retention, compaction, delete, close) runs in a thread under the partition's
lock; appends, truncations and reads are small and run inline. A new partition's log is lazy
(`kraft/log/partition_log.py`): no file, descriptor or fsync until its first append, so the
periodic passes (retention, recovery-point checkpoints) skip logs that are not on disk, and the
offline retry walks only the offline replicas.

It is the broker's `PartitionStateReader` (`kraft/broker/partition_state.py`): the metrics read
frozen views of the local replicas, never the replicas themselves.

Replication (design §6, `kraft/broker/replication/`): followers fetch through `/v1/fetch` with a
`replica_id` (`replica_fetch` here); the leader checks the leader epoch the request carries
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), answers a diverging epoch when the follower's log
went its own way, records the follower's position, advances the high watermark and proposes ISR
changes to the controller (AlterPartition). acks=all produces wait until the high watermark passes
their batch in the leader epoch they were appended in. It implements
`kraft.server.records.ReplicaService`.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Mapping, Sequence, TypeVar

from kraft.errors import KraftError, from_exception
from kraft.broker.log_dirs import LogDir, LogDirs
from kraft.broker.partition_state import PartitionView
from kraft.broker.replica import Replica, ReplicaState
from kraft.broker.replication.alter_partition import AlterPartitionChannel
from kraft.broker.replication.channel import FetchChannel
from kraft.broker.replication.fetcher import FetcherSettings, ReplicaFetcherManager
from kraft.broker.replication.follower import Append, Backoff, PartitionFetchResponse
from kraft.broker.replication.leader import IsrProposal
from kraft.broker.replication.partition import (
    Action, CompleteWaiters, Partition, SendAlterPartition, StartFetching, StopFetching,
    TXN_VERIFICATION_GRACE_MS,
    is_current_registration,
)
from kraft.broker.stage_trace import (
    FETCH_ANSWERED, FOLLOWER_APPEND, FOLLOWER_FETCH, HW_ADVANCE, LEADER_APPEND, NO_TRACE, PRODUCE_ANSWERED,
    StageTrace,
)
from kraft.metrics import NULL_METRICS, MetricsSink
from kraft.log.config import LogConfig
from kraft.log.errors import SequenceError, TxnNotVerifiedError
from kraft.log.partition_log import FetchDataInfo, LogAppendInfo, PartitionLog
from kraft.log.partition_metadata import InconsistentTopicIdError
from kraft.broker.metadata_view import MetadataCache
from kraft.metadata.delta import LocalReplicaChanges, MetadataDelta
from kraft.metadata.image import MetadataImage
from kraft.metadata.topic_name import is_internal
from kraft.server.replica_admin import ActiveProducer
from kraft.server.records import (
    NO_EPOCH, NO_REPLICA, AbortedTransaction, DeleteRecordsEntry, DeleteRecordsResult, DivergingEpoch,
    EpochEndOffset, FetchEntry, FetchPartitionResult, PartitionOffsets, ProduceEntry, ProducePartitionResult,
)

log = logging.getLogger("kraft.broker")

TopicPartition = tuple[str, int]
T = TypeVar("T")
# opens a partition's log: (its directory, its config, the topic id it must belong to)
LogFactory = Callable[[Path, LogConfig, str], PartitionLog]
DELETED_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"  # Kafka's: a directory of another incarnation of the topic, set aside
OPEN_BATCH = 256  # new logs opened per thread hop
ISR_CHECK_SLICE = 256  # replicas checked for ISR expiry per loop turn
MAX_FILE_NAME = 255
INLINE_APPEND_BYTES = 1 << 20  # a produce this large is appended in a thread (`_append`)


def set_aside_name(name: str, suffix: str = DELETED_SUFFIX) -> str:
    """`<dir>.<uuid><suffix>` (Kafka's `-delete` and `-stray` names), the directory name cut so
    the whole stays a legal file name."""
    tail = f".{uuid.uuid4().hex}{suffix}"
    return name[: MAX_FILE_NAME - len(tail)] + tail


def now_ms() -> int:
    return int(time.time() * 1000)


def open_partition_log(directory: Path, config: LogConfig, topic_id: str) -> PartitionLog:
    """The default `LogFactory`: the log on disk (recovered if it was not closed cleanly)."""
    return PartitionLog.open(directory, config, now_ms(), topic_id=topic_id)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True)
class ReplicationSettings:
    replica_lag_time_max_ms: int = 30_000
    fetcher: FetcherSettings = field(default_factory=FetcherSettings)
    # an AlterPartition neither refused nor visible in the metadata after this long is re-sent
    alter_partition_retry_ms: int = 5_000
    # a replica offline on a storage error (its log could not be opened, or could not record the
    # role the metadata gives it: a full disk) is tried again this often
    offline_retry_ms: int = 2_000
    # a log directory whose writes fail with ENOSPC this long (none succeeding) goes offline
    log_dir_full_timeout_ms: int = 30_000
    # transaction.partition.verification.grace.ms (`Partition.awaits_txn_verification`)
    txn_verification_grace_ms: int = TXN_VERIFICATION_GRACE_MS
    # how long an idempotent batch ahead of its producer's sequence waits for its predecessor
    # (on another connection) before OUT_OF_ORDER_SEQUENCE_NUMBER (docs/idempotence.md)
    sequence_wait_ms: int = 200

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ReplicationSettings:
        """From the broker's Kafka-named keys (`replica.lag.time.max.ms`, `replica.fetch.*`)."""
        return cls(
            replica_lag_time_max_ms=int(config["replica.lag.time.max.ms"]),
            log_dir_full_timeout_ms=int(config["log.dir.full.timeout.ms"]),
            txn_verification_grace_ms=int(config["transaction.partition.verification.grace.ms"]),
            fetcher=FetcherSettings(
                max_wait_ms=int(config["replica.fetch.wait.max.ms"]),
                partition_max_bytes=int(config["replica.fetch.max.bytes"]),
            ),
        )

    @property
    def isr_check_interval_ms(self) -> int:
        return max(50, self.replica_lag_time_max_ms // 2)  # Kafka: half the lag time


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        data_dir: Path,
        base_config: LogConfig,
        retention_check_interval_ms: int,
        fetch_max_bytes: int,
        *,
        replication: ReplicationSettings = ReplicationSettings(),
        alter_partition: AlterPartitionChannel | None = None,
        broker_epoch: Callable[[], int] | None = None,
        clock_ms: Callable[[], int] = monotonic_ms,
        recovery_point_checkpoint_interval_ms: int = 60_000,
        metadata_cache: MetadataCache | None = None,
        log_dirs: LogDirs | None = None,
        open_log: LogFactory = open_partition_log,
        open_fetch_channel: Callable[[int], FetchChannel] | None = None,
    ) -> None:
        """`alter_partition` reaches the active controller (None: ISRs never change, enough for
        single-replica partitions); `broker_epoch` is this broker's registration epoch, sent with
        follower fetches (None: no registration, as in tests; else a partition is led only from
        metadata holding that registration, see `Partition.apply_registration`); `clock_ms`
        times follower lag (monotonic); `recovery_point_checkpoint_interval_ms` is Kafka's
        log.flush.offset.checkpoint.interval.ms; `metadata_cache` holds the broker's image (set
        by `BrokerMetadataPublisher`; default: a cache of its own); `log_dirs` are the log
        directories, loaded (default: `data_dir` alone). `open_log` and `open_fetch_channel` (a
        follower's channel to a leader, default `ReplicationChannel`) are the I/O a seeded
        simulation replaces (tests/unit/controlplane/simulation.py)."""
        self.node_id = node_id
        self.data_dir = data_dir
        self.log_dirs = log_dirs or LogDirs([data_dir], node_id)  # not loaded: writes nothing
        # (offline directory ids, their replicas): what the heartbeat reports, read from the
        # lifecycle's thread (one tuple, replaced whole)
        self.offline_report: tuple[tuple[str, ...], tuple[TopicPartition, ...]] = ((), ())
        self.on_log_dir_failure: Callable[[], None] = lambda: None  # the lifecycle heartbeats at once
        self.base_config = base_config
        self.retention_check_interval_ms = retention_check_interval_ms
        self.recovery_point_checkpoint_interval_ms = recovery_point_checkpoint_interval_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.replication = replication
        self.alter_partition = alter_partition
        self.clock_ms = clock_ms
        self.broker_epoch = broker_epoch
        self.metadata_cache = metadata_cache or MetadataCache()
        self._open_log = open_log
        self._replicas: dict[TopicPartition, Replica] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._retention_task: asyncio.Task[None] | None = None
        self._isr_task: asyncio.Task[None] | None = None
        self._checkpoint_task: asyncio.Task[None] | None = None
        self._offline_task: asyncio.Task[None] | None = None
        self._fetch_errors: dict[TopicPartition, str] = {}  # the last error each partition backs off on
        self._unwritable: set[TopicPartition] = set()  # partitions whose last leader append failed
        self._offline: set[TopicPartition] = set()  # replicas `retry_offline` tries again
        self._closed = False
        self._stopping = False  # `begin_shutdown` ran: the node no longer serves
        self.fetchers = ReplicaFetcherManager(
            node_id, self, self._broker_endpoint, broker_epoch or (lambda: -1), replication.fetcher,
            open_fetch_channel,
        )
        self.metrics: MetricsSink = NULL_METRICS
        self.trace: StageTrace = NO_TRACE  # the node sets its own when stage.trace.events > 0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._retention_task = loop.create_task(self._retention_loop())
        self._isr_task = loop.create_task(self._isr_loop())
        self._checkpoint_task = loop.create_task(self._checkpoint_loop())
        self._offline_task = loop.create_task(self._offline_loop())
        leftovers = [p for d in self.log_dirs.dirs if d.online
                     for p in d.path.glob(f"*{DELETED_SUFFIX}") if p.is_dir()]
        for path in leftovers:  # deletions a crash interrupted
            self._spawn(lambda p=path: asyncio.to_thread(shutil.rmtree, p, True))

    def begin_shutdown(self) -> None:
        """The node is about to stop serving (its controlled shutdown done). Its followers will
        stop reaching it because it stops, not because they fell behind: no ISR shrinks from here
        (Kafka stops its isr-expiration task with the broker), and acks=all produces still
        waiting answer now with a retriable error (the client retries with the new leader)
        instead of holding the shutdown until their timeout."""
        self._stopping = True
        if self._isr_task is not None:
            self._isr_task.cancel()
        for replica in self._replicas.values():
            replica.wake_all()

    async def close(self) -> None:
        """Stops background work, then flushes and closes every log (checkpoints written)."""
        self._closed = True
        await self.fetchers.close()
        background = [t for t in (self._retention_task, self._isr_task, self._checkpoint_task,
                                  self._offline_task) if t is not None]
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        replicas, self._replicas = list(self._replicas.values()), {}
        await asyncio.gather(*(self._close_replica(r) for r in replicas))

    async def _close_replica(self, replica: Replica) -> None:
        await replica.wait_ready()
        if replica.log is None:
            return
        async with replica.lock:
            try:
                await asyncio.to_thread(replica.log.close)
            except Exception:
                log.exception("closing %s-%d failed", replica.topic, replica.partition)

    def _spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        async def logged() -> None:
            try:
                await work()
            except Exception:
                log.exception("background replica work failed")

        task = asyncio.get_running_loop().create_task(logged())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- metadata ------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.metadata_cache.image

    def on_metadata_update(self, delta: MetadataDelta | None, image: MetadataImage) -> None:
        """Standalone use (no `BrokerMetadataPublisher`): set the image, apply the delta's local
        changes (None: everything that differs from the current image)."""
        if delta is None:
            delta = MetadataDelta.from_snapshot(self.image, image)
        self.metadata_cache.set_image(image)
        self.apply_delta(delta.local_changes(self.node_id), image)

    def apply_delta(self, changes: LocalReplicaChanges, image: MetadataImage) -> None:
        """Kafka's `ReplicaManager.applyDelta`: deletes, then the partitions this broker now
        leads or follows, then config changes; only the partitions named in `changes` are
        touched. New logs open in batches in a thread (`_open_replicas`). One partition's
        failure never stops the others' changes: a storage error takes that replica offline
        (`_apply_role`), anything else is logged."""
        if self._closed:
            return
        for key in changes.deletes:
            replica = self._replicas.pop(key, None)
            if replica is not None:
                self._drop_replica(key, replica)
        configs: dict[str, LogConfig] = {}
        opening: list[Replica] = []
        for key, reg in (*changes.leaders.items(), *changes.followers.items()):
            state = ReplicaState(changes.topic_ids[key[0]], reg.leader, reg.leader_epoch,
                                 reg.partition_epoch, reg.replicas, reg.isr, reg.removing_replicas)
            config = configs.get(key[0])
            if config is None:
                config = configs[key[0]] = self._log_config(image, key[0])
            try:
                replica = self._replicas.get(key)
                if replica is not None and replica.state.topic_id != state.topic_id:
                    del self._replicas[key]  # the name was re-created: a fresh log
                    self._drop_replica(key, replica)
                    replica = None
                if replica is None:
                    log_dir = self.log_dirs.place(f"{key[0]}-{key[1]}")
                    replica = Replica(key[0], key[1], log_dir.path, self.node_id, state, config)
                    self._replicas[key] = replica
                    if log_dir.online:
                        opening.append(replica)
                    else:
                        self._in_offline_dir(replica, log_dir)
                else:
                    replica.state = state
                    self._set_config(replica, config)
                    if replica.log is not None:
                        self._apply_role(replica)
            except Exception:
                log.exception("%s-%d: applying the metadata (leader %d at epoch %d) failed; the "
                              "other partitions of this update are applied", key[0], key[1],
                              reg.leader, reg.leader_epoch)
        for topic in changes.config_topics - configs.keys():
            t = image.topic_by_name(topic)
            config = self._log_config(image, topic)
            for index in () if t is None else t.partitions:
                replica = self._replicas.get((topic, index))
                if replica is not None:
                    self._set_config(replica, config)
        for i in range(0, len(opening), OPEN_BATCH):
            self._spawn(lambda batch=opening[i:i + OPEN_BATCH]: self._open_replicas(batch))
        if changes.unfenced_brokers:
            # a restarted broker that caught up while fenced rejoins the ISR now, not at its next
            # fetch (which a caught-up follower's long poll holds for up to
            # replica.fetch.wait.max.ms) or the next ISR check (issue 26)
            self._spawn(lambda: self.check_isr(frozenset(changes.unfenced_brokers)))
        if self.log_dirs.offline:
            self._report_offline()

    @staticmethod
    def _set_config(replica: Replica, config: LogConfig) -> None:
        replica.config = config
        if replica.log is not None:
            replica.log.config = config

    def _drop_replica(self, key: TopicPartition, replica: Replica) -> None:
        self.fetchers.remove(key)
        self.log_dirs.forget(f"{key[0]}-{key[1]}")
        if replica.core is not None:
            self._perform(replica, replica.core.stop())
            replica.core = None
        self._spawn(lambda: self._delete_replica(replica))

    def _apply_role(self, replica: Replica) -> None:
        """Makes this broker the partition's leader or follower as its registration says (the
        core decides, Kafka's makeLeader / makeFollower). Runs inline on the loop, so no request
        sees half a change."""
        log_dir = self._log_dir(replica)
        if not log_dir.online:
            self._in_offline_dir(replica, log_dir)
            return
        if replica.core is None:
            replica.core = Partition(
                self.node_id, replica.topic, replica.partition, replica.log,
                replica_lag_time_max_ms=self.replication.replica_lag_time_max_ms,
                alter_partition_retry_ms=self.replication.alter_partition_retry_ms,
                txn_verification_grace_ms=self.replication.txn_verification_grace_ms,
                is_unfenced=lambda r: self.image.cluster.is_unfenced(r),
                registered_broker_epoch=self._registered_broker_epoch,
                can_alter_partition=self.alter_partition is not None,
            )
        may_lead = self.broker_epoch is None or is_current_registration(
            self.image, self.node_id, self.broker_epoch())
        try:
            actions = replica.core.apply_registration(replica.state, self.clock_ms(), may_lead=may_lead)
        except OSError as e:
            self._perform(replica, replica.core.go_offline(replica.state))
            if not self._storage_failed(replica, e):
                self._mark_offline(replica, e)
            return
        self._perform(replica, actions)
        if replica.storage_error is not None:
            replica.storage_error = None
            self._wrote(replica)
            self._offline.discard((replica.topic, replica.partition))
            log.warning("%s-%d: back online (leader %d at epoch %d)", replica.topic,
                        replica.partition, replica.state.leader, replica.state.leader_epoch)

    def _mark_offline(self, replica: Replica, error: OSError) -> None:
        """Kafka's offline partition, for one replica whose log cannot record its role: it has
        none (no leading, no fetching), requests answer KAFKA_STORAGE_ERROR, and the role is
        applied again by the next metadata change or `retry_offline`."""
        first, replica.storage_error = replica.storage_error is None, error
        self._offline.add((replica.topic, replica.partition))
        state = replica.state
        role = "leader" if state.leader == self.node_id else "follower"
        if not first:
            log.debug("%s-%d: still offline: %s", replica.topic, replica.partition, error)
            return
        log.error("%s-%d: offline: cannot become %s at leader epoch %d, the log cannot be written "
                  "(%s). Requests for it answer KAFKA_STORAGE_ERROR until it can: free space on "
                  "%s (or fix the disk); the role is tried again every %d ms and at the next "
                  "metadata change", replica.topic, replica.partition, role, state.leader_epoch,
                  error, replica.data_dir, self.replication.offline_retry_ms)

    # -- log directories (JBOD) ---------------------------------------------------------------

    def _log_dir(self, replica: Replica) -> LogDir:
        log_dir = self.log_dirs.dir_of(replica.data_dir)
        assert log_dir is not None, replica.data_dir
        return log_dir

    def _storage_failed(self, replica: Replica, error: BaseException) -> bool:
        """Whether `error` (from the replica's log) means its directory failed; if so the
        directory goes offline with every replica on it (`LogDirs.is_dir_failure`, or a full
        disk that did not heal: `LogDirs.full_too_long`)."""
        log_dir = self._log_dir(replica)
        if not (LogDirs.is_dir_failure(error, log_dir.path) or self.log_dirs.full_too_long(
                log_dir, error, self.clock_ms(), self.replication.log_dir_full_timeout_ms)):
            return False
        if self.log_dirs.fail(log_dir, error):
            for other in list(self._replicas.values()):
                if other.data_dir == log_dir.path:
                    self._in_offline_dir(other, log_dir)
            self._report_offline()
            self.on_log_dir_failure()
        return True

    def _wrote(self, replica: Replica) -> None:
        """A write to the replica's log succeeded (its directory's disk is not full)."""
        if self.log_dirs.full_since_ms:  # the common case: no directory met ENOSPC
            self.log_dirs.wrote(replica.data_dir)

    def _in_offline_dir(self, replica: Replica, log_dir: LogDir) -> None:
        """Kafka's offline replica of a failed log directory: no role, no fetching, requests
        answer KAFKA_STORAGE_ERROR; never retried (the directory comes back with a restart)."""
        if replica.storage_error is None:
            replica.storage_error = OSError(f"log directory {log_dir.path} is offline ({log_dir.error})")
        self._offline.discard((replica.topic, replica.partition))
        self.fetchers.remove((replica.topic, replica.partition))
        if replica.core is not None:
            self._perform(replica, replica.core.go_offline(replica.state))
        replica.wake_all()

    def log_directories(self) -> list[tuple[str, bool]]:
        """(path, online) of each log directory, for the metrics."""
        return [(str(d.path), d.online) for d in self.log_dirs.dirs]

    def _report_offline(self) -> None:
        offline = {d.path for d in self.log_dirs.offline}
        replicas = tuple(sorted(k for k, r in self._replicas.items() if r.data_dir in offline))
        self.offline_report = (tuple(self.log_dirs.offline_ids()), replicas)

    def _registered_broker_epoch(self, broker_id: int) -> int | None:
        broker = self.image.cluster.broker(broker_id)
        return None if broker is None else broker.broker_epoch

    def _perform(self, replica: Replica, actions: Sequence[Action]) -> None:
        """Carries out what a replica's core decided."""
        key = (replica.topic, replica.partition)
        for action in actions:
            if isinstance(action, StartFetching):
                self.fetchers.assign(key, action.leader_id, action.leader_epoch)
            elif isinstance(action, StopFetching):
                self.fetchers.remove(key)
            elif isinstance(action, CompleteWaiters):
                self.trace.record(HW_ADVANCE, replica.topic, replica.partition, action.high_watermark)
                if action.role_changed:
                    replica.wake_all()
                else:
                    replica.wake_high_watermark(action.high_watermark)
            elif isinstance(action, SendAlterPartition):
                if not self._closed and self.alter_partition is not None:
                    self._spawn(lambda p=action.proposal: self._send_alter_partition(replica, p))
            else:
                raise AssertionError(f"unknown action {action!r}")

    def _broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        broker = self.image.cluster.broker(broker_id)
        endpoint = None if broker is None else broker.endpoint()
        return None if endpoint is None else (endpoint.host, endpoint.port)

    def _log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        overrides = image.topic_configs(topic)
        if not overrides:
            return self.base_config
        try:
            return LogConfig.from_topic_configs(overrides, self.base_config)
        except ValueError:
            log.exception("topic %s has invalid configs %s; using defaults", topic, dict(overrides))
            return self.base_config

    async def _open_replicas(self, replicas: list[Replica]) -> None:
        """Opens a batch of new logs in one thread hop, then applies their roles on the loop:
        thousands of new partitions cost a few loop turns, not one hop (and GIL fight) each."""
        try:
            opened = await asyncio.to_thread(self._open_logs, replicas)
        except BaseException:
            for replica in replicas:
                replica.set_ready()
            raise
        for replica, result in zip(replicas, opened):
            try:
                if isinstance(result, BaseException):
                    raise result
                replica.log, replica.open_error = result, None
                self._offline.discard((replica.topic, replica.partition))
                if self._replicas.get((replica.topic, replica.partition)) is replica:
                    self._apply_role(replica)
            except Exception as e:
                if self._storage_failed(replica, e):
                    replica.open_error = e
                    continue
                again, replica.open_error = replica.open_error is not None, e
                if isinstance(e, OSError):
                    self._offline.add((replica.topic, replica.partition))
                if isinstance(e, OSError) and again:
                    log.debug("%s: still cannot open: %s", replica.directory, e)
                elif isinstance(e, OSError):
                    log.error("cannot open log %s: %s; its requests answer KAFKA_STORAGE_ERROR; "
                              "opening it is tried again every %d ms", replica.directory, e,
                              self.replication.offline_retry_ms)
                else:
                    log.error("cannot open log %s", replica.directory, exc_info=e)
            finally:
                replica.set_ready()

    def _open_logs(self, replicas: list[Replica]) -> list[PartitionLog | BaseException]:
        """In a thread: open each log (a new partition's creates nothing, see
        `kraft/log/partition_log.py`); a new leader's epoch start is assigned here too, so the
        epoch checkpoint of a log with files is not written (with fsync) on the loop when the
        role is applied (a log without files keeps it in memory until its first append)."""
        opened: list[PartitionLog | BaseException] = []
        for replica in replicas:
            state = replica.state
            try:
                try:
                    plog = self._open_log(replica.directory, replica.config, state.topic_id)
                except InconsistentTopicIdError as e:
                    self._set_aside_stray(replica, e)
                    plog = self._open_log(replica.directory, replica.config, state.topic_id)
            except Exception as e:
                opened.append(e)
                continue
            if state.leader == self.node_id:
                latest = plog.leader_epoch_cache.latest_epoch
                if latest is None or latest < state.leader_epoch:
                    try:
                        plog.assign_epoch_start(state.leader_epoch, plog.log_end_offset)
                    except OSError:
                        pass  # the role, applied on the loop, tries again (offline if it fails)
            opened.append(plog)
        return opened

    @staticmethod
    def _set_aside_stray(replica: Replica, error: InconsistentTopicIdError) -> None:
        """A directory of an earlier topic of the same name (its deletion never removed it, say)
        is never served as this one: renamed aside, as Kafka's stray logs, and kept for the
        operator to inspect or delete."""
        directory = replica.directory
        stray = directory.with_name(set_aside_name(directory.name, STRAY_SUFFIX))
        directory.rename(stray)
        log.warning("%s: %s; set aside as %s (never served as %s-%d, whose log starts empty "
                    "here). Inspect it, then delete it", directory, error, stray.name,
                    replica.topic, replica.partition)

    async def _delete_replica(self, replica: Replica) -> None:
        """Renames the directory out of the way at once (a re-created topic gets a fresh one),
        then deletes it in a thread, as Kafka's `-delete` suffix does."""
        await replica.wait_ready()
        async with replica.lock:
            if replica.log is not None:
                await asyncio.to_thread(replica.log.close)
            replica.log = None
            directory = replica.directory
            if directory.exists():
                doomed = directory.with_name(set_aside_name(directory.name))
                directory.rename(doomed)
                await asyncio.to_thread(shutil.rmtree, doomed, True)
        log.info("deleted replica %s-%d", replica.topic, replica.partition)

    # -- lookups ------------------------------------------------------------------------------

    def _not_here(self, topic: str, partition: int) -> KraftError:
        registration = self.image.partition(topic, partition)
        if registration is None:
            return KraftError(
                "UNKNOWN_TOPIC_OR_PARTITION", f"{topic}-{partition} does not exist"
            )
        return self._not_leader(topic, partition)

    def _leader_info(self, topic: str, partition: int) -> dict[str, Any] | None:
        registration = self.image.partition(topic, partition)
        endpoint = self.image.leader_endpoint(topic, partition)
        if registration is None or endpoint is None:
            return None
        return {"node_id": registration.leader, "host": endpoint.host, "port": endpoint.port}

    def _not_leader(self, topic: str, partition: int) -> KraftError:
        leader = self._leader_info(topic, partition)
        return KraftError(
            "NOT_LEADER_OR_FOLLOWER", f"node {self.node_id} is not the leader of {topic}-{partition}",
            **({} if leader is None else {"leader": leader}),
        )

    async def _ready_replica(self, topic: str, partition: int) -> Replica:
        replica = self._replicas.get((topic, partition))
        if replica is None:
            raise self._not_here(topic, partition)
        await replica.wait_ready()
        if replica.open_error is not None or replica.log is None:
            raise KraftError("KAFKA_STORAGE_ERROR", f"log of {topic}-{partition} is unavailable")
        if replica.storage_error is not None:
            raise KraftError("KAFKA_STORAGE_ERROR", f"{topic}-{partition} is offline on node "
                                                    f"{self.node_id}: {replica.storage_error}")
        return replica

    async def _leader_replica(
        self, topic: str, partition: int, current_leader_epoch: int = NO_EPOCH
    ) -> Replica:
        """The replica, when this broker leads it at `current_leader_epoch` (if given); Kafka's
        checkCurrentLeaderEpoch first, then the leadership check."""
        replica = await self._ready_replica(topic, partition)
        core = replica.core
        if core is None:  # deleted while opening
            raise self._not_here(topic, partition)
        error = core.check_leader_epoch(current_leader_epoch)
        if error is not None:
            raise error
        if not core.is_leader:
            raise self._not_leader(topic, partition)
        return replica

    # -- produce ------------------------------------------------------------------------------

    async def produce(
        self, entries: Sequence[ProduceEntry], acks: int, timeout_ms: int, *, coordinator: bool = False
    ) -> list[ProducePartitionResult]:
        """`coordinator`: a coordinator's own write for a producer (`PartitionLog.append_as_leader`).
        `timeout_ms` bounds the whole request, its batches' sequence waits as its acks=all wait
        (Kafka's request timeout: one deadline)."""
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        appended: list[tuple[ProduceEntry, Replica | None, int, LogAppendInfo | None, KraftError | None]] = []
        for entry in entries:
            try:
                replica, epoch, info = await self._append(entry, acks, coordinator, deadline)
                appended.append((entry, replica, epoch, info, None))
                self.metrics.messages_in(entry.topic, info.last_offset + 1 - info.first_offset, len(entry.records))
            except Exception as e:
                self.metrics.failed_produce(entry.topic)
                appended.append((entry, None, -1, None, _as_kraft_error(e)))
        # one after the other, not a task each (two turns of the loop per task): the waits share
        # one deadline and each returns at once once its high watermark was reached meanwhile
        return [await self._produce_result(entry, replica, epoch, info, error, acks, deadline)
                for entry, replica, epoch, info, error in appended]

    async def _append(self, entry: ProduceEntry, acks: int, coordinator: bool,
                      deadline: float) -> tuple[Replica, int, LogAppendInfo]:
        """Appends as leader; returns the replica, the leader epoch and what was appended.
        Past INLINE_APPEND_BYTES the append runs in a thread: validating a Kafka producer's v2
        batches parses every record (log/validator.py), seconds for a 100 MiB request. A batch
        ahead of its producer's sequence waits up to `sequence_wait_ms` for its predecessor, and
        not past the request's `deadline` (loop time)."""
        return await self._append_as_leader(
            entry.topic, entry.partition, acks,
            lambda plog, epoch: plog.append_as_leader(entry.records, epoch, now_ms(), coordinator=coordinator),
            inline=len(entry.records) < INLINE_APPEND_BYTES,
            waits_until=min(deadline, asyncio.get_running_loop().time() + self.replication.sequence_wait_ms / 1000))

    async def _append_as_leader(self, topic: str, partition: int, acks: int,
                                write: Callable[[PartitionLog, int], Any], inline: bool = True,
                                waits_until: float = 0.0) -> tuple[Replica, int, LogAppendInfo]:
        """`write(log, leader_epoch)` on the partition this broker leads, under its lock (a produce's
        batches or a transaction marker), in a thread unless `inline` (the log is thread-safe; the
        lock keeps the partition's appends in order); the replica, leader epoch and what `write`
        appended. An idempotent batch that starts past its producer's next sequence is written
        once its predecessor is, if that comes by `waits_until` (loop time; each append wakes it
        to try again): the producer's requests in flight travel on separate connections and
        may arrive out of order (docs/idempotence.md)."""
        replica = await self._leader_replica(topic, partition)
        refused = replica.core.check_produce(acks)
        if refused is not None:
            raise refused
        loop = asyncio.get_running_loop()
        waited = False  # counted once a batch, however many appends wake it
        while True:
            appended: asyncio.Future[None] = loop.create_future()
            try:
                return await self._write_as_leader(replica, topic, partition, write, inline, appended)
            except SequenceError as e:
                if not e.ahead or loop.time() >= waits_until:
                    replica.forget_waiter(appended)
                    raise
            if not waited:
                waited = True
                self.metrics.sequence_wait(topic)
            try:  # registered under the lock, so the predecessor's append cannot be missed
                async with asyncio.timeout(waits_until - loop.time()):
                    await appended
            except TimeoutError:
                pass  # one last try: refused now unless the predecessor came just in time
            finally:
                replica.forget_waiter(appended)

    async def _write_as_leader(self, replica: Replica, topic: str, partition: int,
                               write: Callable[[PartitionLog, int], Any], inline: bool,
                               appended: asyncio.Future[None]) -> tuple[Replica, int, LogAppendInfo]:
        """`_append_as_leader`'s write under the lock; a batch ahead of its sequence registers
        `appended` for the partition's next append before its refusal is raised."""
        async with replica.lock:
            core = replica.core
            if replica.log is None or core is None or core.leader_state is None:
                raise self._not_here(topic, partition)  # deleted or deposed meanwhile
            leader_epoch = core.leader_state.leader_epoch
            tp = (topic, partition)
            try:
                info = (write(replica.log, leader_epoch) if inline
                        else await asyncio.to_thread(write, replica.log, leader_epoch))
            except SequenceError as e:
                if e.ahead:
                    replica.wait_for_append(appended)
                raise
            except TxnNotVerifiedError as e:
                if core.awaits_txn_verification(self.clock_ms()):
                    # Kafka's answer while the coordinator cannot tell yet: its clients retry it
                    raise KraftError("NOT_ENOUGH_REPLICAS", f"{topic}-{partition}: {e}; this broker leads it "
                                     f"since epoch {leader_epoch} and the coordinator's verification has not "
                                     f"reached it yet: retry") from e
                raise
            except OSError as e:
                if self._storage_failed(replica, e):
                    raise KraftError("KAFKA_STORAGE_ERROR", f"{topic}-{partition}: "
                                     f"{replica.storage_error}") from e
                # a full disk: the log cut the partial batch, so the partition stays usable and
                # takes writes again once one succeeds
                if tp not in self._unwritable:  # log the transition, not every refused produce
                    self._unwritable.add(tp)
                    log.error("%s-%d: cannot write the log: %s; produce answers KAFKA_STORAGE_ERROR "
                              "until a write succeeds", topic, partition, e)
                raise KraftError("KAFKA_STORAGE_ERROR",
                                 f"{topic}-{partition}: cannot write the log: {e}") from e
            if not inline and (replica.core is not core or core.leader_state is None
                               or core.leader_state.leader_epoch != leader_epoch):
                # deposed while the thread appended: the batches wait for the new leader's
                # truncation, unanswered (the producer retries), as any write past the HW would
                raise self._not_here(topic, partition)
            if tp in self._unwritable:
                self._unwritable.discard(tp)
                log.warning("%s-%d: the log is writable again", topic, partition)
            self._wrote(replica)
            self.trace.record(LEADER_APPEND, topic, partition, info.last_offset + 1)
            replica.wake_appended()
            self._perform(replica, core.on_leader_append(self.clock_ms()))
        return replica, leader_epoch, info

    # -- transactions (the partition side of the transaction coordinator's requests) -----------

    async def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool, timeout_ms: int) -> int:
        """Kafka's WriteTxnMarkers for one partition this broker leads: appends the COMMIT or
        ABORT marker and answers its offset once the high watermark passed it (acks=all, as
        Kafka's coordinator writes markers). Raises KraftError (INVALID_PRODUCER_EPOCH and
        TRANSACTION_COORDINATOR_FENCED from the log, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT...)."""
        replica, leader_epoch, info = await self._append_as_leader(
            topic, partition, -1,
            lambda plog, epoch: plog.append_control(producer_id, producer_epoch, coordinator_epoch,
                                                    commit, epoch, now_ms()))
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        error = await self._await_high_watermark(replica, leader_epoch, info.last_offset + 1, deadline)
        if error is not None:
            raise error
        return info.first_offset

    async def verify_transaction(self, topic: str, partition: int, producer_id: int,
                                 producer_epoch: int) -> None:
        """KIP-890's partition-side hook, for the coordinator's AddPartitionsToTxn: the
        transactional batches of (producer id, epoch) may begin a transaction in this partition
        this broker leads (else they get INVALID_TXN_STATE)."""
        replica = await self._leader_replica(topic, partition)
        async with replica.lock:
            if replica.log is None or replica.core is None or not replica.core.is_leader:
                raise self._not_here(topic, partition)
            replica.log.verify_transaction(producer_id, producer_epoch)

    async def _produce_result(
        self, entry: ProduceEntry, replica: Replica | None, leader_epoch: int, info: LogAppendInfo | None,
        error: KraftError | None, acks: int, deadline: float,
    ) -> ProducePartitionResult:
        if error is None and replica is not None and info is not None and acks == -1:
            error = await self._await_high_watermark(replica, leader_epoch, info.last_offset + 1, deadline)
        if error is not None or replica is None or info is None:
            assert error is not None
            return ProducePartitionResult(entry.topic, entry.partition, -1, -1, error.error_code, error.message)
        base_offset = -1 if acks == 0 else info.first_offset
        log_start_offset = replica.log.log_start_offset if replica.log is not None else -1
        self.trace.record(PRODUCE_ANSWERED, entry.topic, entry.partition, info.last_offset + 1)
        return ProducePartitionResult(entry.topic, entry.partition, base_offset, log_start_offset,
                                      log_append_time=info.log_append_time)

    async def _await_high_watermark(
        self, replica: Replica, leader_epoch: int, target: int, deadline: float
    ) -> KraftError | None:
        """None once the HW reaches `target` while this broker still leads at `leader_epoch`
        (after a leader change the offsets may hold other records: the write is not acked)."""

        def outcome() -> KraftError | bool | None:
            core = replica.core
            completed = None if core is None or replica.log is None else core.produce_completed(
                leader_epoch, target)
            if core is None or replica.log is None or completed is False:
                return self._not_leader(replica.topic, replica.partition)
            return completed or self._shutting_down(replica)

        result = await self._wait_until(replica, deadline, outcome, target)
        if result is True:
            return None
        if result is not None:
            return result
        core = replica.core
        if core is not None and core.under_min_isr():
            return KraftError(
                "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                f"{replica.topic}-{replica.partition}: appended, but the ISR "
                f"{list(core.leader_state.isr)} fell below min.insync.replicas",
            )
        return KraftError(
            "REQUEST_TIMED_OUT",
            f"{replica.topic}-{replica.partition}: not replicated to the ISR in time",
        )

    def _shutting_down(self, replica: Replica) -> KraftError | None:
        if not self._stopping:
            return None
        return KraftError("NOT_LEADER_OR_FOLLOWER", f"broker {self.node_id} is shutting down: "
                          f"retry {replica.topic}-{replica.partition} with its new leader")

    @staticmethod
    async def _wait_until(replica: Replica, deadline: float, outcome: Callable[[], T | None],
                          target: int | None = None) -> T | None:
        """`outcome()` once it is not None, asked again at every wake of the replica's
        high-watermark waiters (the HW advanced, the role or the replicas changed, a follower's
        log start rose), or with `target` only when the HW reaches it or the role changes;
        None at `deadline` (loop time)."""
        loop = asyncio.get_running_loop()
        while True:
            result = outcome()
            remaining = deadline - loop.time()
            if result is not None or remaining <= 0:
                return result
            future = loop.create_future()
            if target is None:
                replica.wait_for_data(future)
            else:
                replica.wait_for_high_watermark(future, target)
            try:  # the future itself, not wait_for: its callback cost a turn of the loop per wake-up
                async with asyncio.timeout(remaining):
                    await future
            except TimeoutError:
                pass
            finally:
                replica.forget_waiter(future)

    # -- delete records -----------------------------------------------------------------------

    async def delete_records(
        self, entries: Sequence[DeleteRecordsEntry], timeout_ms: int
    ) -> list[DeleteRecordsResult]:
        """Kafka's ReplicaManager.deleteRecords: on each partition this broker leads, moves the
        log start offset to the entry's offset (-1: the high watermark) and checkpoints it, then
        answers once the low watermark (every live replica's log start, learnt from their
        fetches) reached it, or REQUEST_TIMED_OUT after `timeout_ms` (Kafka's
        DelayedDeleteRecords). Segments wholly below the new log start go at the next retention
        pass, on the followers too. One result per entry, each with its own error."""
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        return list(await asyncio.gather(*(self._delete_records(e, deadline) for e in entries)))

    async def _delete_records(self, entry: DeleteRecordsEntry, deadline: float) -> DeleteRecordsResult:
        try:
            replica, leader_epoch, target = await self._delete_records_on_leader(entry)
        except Exception as e:
            error = _as_kraft_error(e)
            return DeleteRecordsResult(entry.topic, entry.partition, -1, error.error_code, error.message)
        return await self._await_low_watermark(replica, leader_epoch, target, deadline)

    async def _delete_records_on_leader(self, entry: DeleteRecordsEntry) -> tuple[Replica, int, int]:
        """The replica, its leader epoch and the new log start (Kafka's deleteRecordsOnLocalLog)."""
        if is_internal(entry.topic):
            raise KraftError("INVALID_TOPIC_EXCEPTION", f"Cannot delete records of internal topic {entry.topic}")
        replica = await self._leader_replica(entry.topic, entry.partition)
        async with replica.lock:
            core = replica.core
            if replica.log is None or core is None or not core.is_leader:
                raise self._not_here(entry.topic, entry.partition)  # deleted or deposed meanwhile
            target = core.check_delete_records(entry.offset)
            if await asyncio.to_thread(replica.log.maybe_increment_log_start_offset, target):
                log.info("%s-%d: log start offset moved to %d by DeleteRecords", entry.topic,
                         entry.partition, target)
                replica.wake_appended()  # followers' long polls answer with the new log start
            return replica, core.leader_epoch, target

    async def _await_low_watermark(
        self, replica: Replica, leader_epoch: int, target: int, deadline: float
    ) -> DeleteRecordsResult:
        topic, partition = replica.topic, replica.partition

        def outcome() -> DeleteRecordsResult | None:
            core = replica.core
            if core is None or replica.log is None or not core.is_leader or core.leader_epoch != leader_epoch:
                error = self._not_leader(topic, partition)
            else:
                low = core.low_watermark()
                if low >= target:
                    return DeleteRecordsResult(topic, partition, low)
                error = self._shutting_down(replica)
            return None if error is None else DeleteRecordsResult(topic, partition, -1, error.error_code,
                                                                  error.message)

        return await self._wait_until(replica, deadline, outcome) or DeleteRecordsResult(
            topic, partition, -1, "REQUEST_TIMED_OUT",
            f"{topic}-{partition}: the log start offset moved to {target}, but not every live "
            f"replica's reached it in time")

    # -- fetch --------------------------------------------------------------------------------

    async def fetch(
        self, entries: Sequence[FetchEntry], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> list[FetchPartitionResult]:
        """A consumer fetch: records below the high watermark."""
        return await self.replica_fetch(NO_REPLICA, -1, entries, max_wait_ms, min_bytes, max_bytes)

    async def replica_fetch(
        self, replica_id: int, replica_epoch: int, entries: Sequence[FetchEntry],
        max_wait_ms: int, min_bytes: int, max_bytes: int,
    ) -> list[FetchPartitionResult]:
        """A fetch from a consumer (`replica_id` -1: below the HW) or a follower (up to the log
        end, recording its position). Long poll: answers when `min_bytes` are there, on an
        error or a diverging epoch, when a follower has a high watermark to learn, or at
        `max_wait_ms`."""
        stale = self._stale_replica_epoch(replica_id, replica_epoch)
        if stale is not None:
            return [_error_result(e.topic, e.partition, stale) for e in entries]
        results = await self._fetch(replica_id, replica_epoch, entries, max_wait_ms, min_bytes,
                                    max_bytes)
        self.metrics.fetched(results, replication=replica_id != NO_REPLICA)
        return results

    async def read_committed(self, topic: str, partition: int, offset: int, max_bytes: int,
                             max_wait_ms: int) -> FetchPartitionResult:
        """The group coordinator loading a partition it leads: a consumer's read (batches below
        the high watermark, a long poll for them), not counted in the fetch metrics."""
        [r] = await self._fetch(NO_REPLICA, -1, [FetchEntry(topic, partition, offset, max_bytes)],
                                max_wait_ms, 1, max_bytes)
        return r

    async def _fetch(
        self, replica_id: int, replica_epoch: int, entries: Sequence[FetchEntry],
        max_wait_ms: int, min_bytes: int, max_bytes: int,
    ) -> list[FetchPartitionResult]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        max_bytes = min(max_bytes, self.fetch_max_bytes)
        first_pass = True
        while True:
            # Kafka's tryCompleteElseWatch: the wake-up is registered on each partition before it
            # is read, so an append to a partition already read while this pass waits for another
            # one's lock wakes it (registered after the pass, that append was missed until
            # max_wait_ms)
            future = loop.create_future()
            replicas: list[Replica] = []
            try:
                results, news = await self._read_all(replica_id, replica_epoch, entries, max_bytes,
                                                     first_pass, future, replicas)
                first_pass = False
                total = sum(len(r.records) for r in results)
                remaining = deadline - loop.time()
                if total >= min_bytes or remaining <= 0 or news:
                    return results
                try:  # the future itself, not wait_for: its callback cost a turn per wake-up
                    async with asyncio.timeout(remaining):
                        await future
                except TimeoutError:
                    pass
            finally:
                for replica in replicas:
                    replica.forget_waiter(future)

    def _stale_replica_epoch(self, replica_id: int, replica_epoch: int) -> KraftError | None:
        """A follower naming a broker epoch other than its registration's is an old incarnation
        (KIP-903's ReplicaEpoch): it must not move the high watermark."""
        if replica_id == NO_REPLICA or replica_epoch < 0:
            return None
        broker = self.image.cluster.broker(replica_id)
        if broker is None or broker.broker_epoch == replica_epoch:
            return None
        return KraftError("STALE_BROKER_EPOCH", f"broker {replica_id} epoch {replica_epoch} is "
                                                f"not its registered epoch {broker.broker_epoch}")

    async def _read_all(
        self, replica_id: int, replica_epoch: int, entries: Sequence[FetchEntry],
        max_bytes: int, record_positions: bool, wake: asyncio.Future[None], replicas: list[Replica],
    ) -> tuple[list[FetchPartitionResult], bool]:
        """One pass over the partitions: the results, and whether to answer now regardless of
        size (an error, a diverging epoch, a log start to pass on). Each partition's replica
        is added to `replicas` with `wake` registered on it before it is read: resolved by its
        next append (a follower) or high-watermark advance (a consumer). A high watermark newer
        than the follower's is not news: as in Kafka's DelayedFetch, the follower learns it with
        its next data or at max_wait_ms. Answering it at once cost each append a second
        exchange with every follower, and the follower's fetch was then not parked when the
        next append came (docs/benchmarks.md, "Third round: a quiet machine")."""
        results: list[FetchPartitionResult] = []
        news = False
        budget = max_bytes
        for entry in entries:
            try:
                replica = await self._leader_replica(
                    entry.topic, entry.partition, entry.current_leader_epoch
                )
            except Exception as e:
                error = _as_kraft_error(e)
                leader = (self._leader_info(entry.topic, entry.partition)
                          if error.error_code == "NOT_LEADER_OR_FOLLOWER" else None)
                results.append(_error_result(entry.topic, entry.partition, error, leader))
                news = True
                continue
            replicas.append(replica)
            if replica_id == NO_REPLICA:
                replica.wait_for_data(wake)
            else:
                replica.wait_for_append(wake)
            async with replica.lock:
                if replica_id == NO_REPLICA:
                    result = self._read_for_consumer(replica, entry, max_bytes, budget)
                else:
                    result = self._read_for_follower(
                        replica, replica_id, replica_epoch, entry, max_bytes, budget,
                        record_positions,
                    )
            results.append(result)
            news = news or result.error_code is not None or result.diverging_epoch is not None
            if replica_id != NO_REPLICA and result.error_code is None:
                # the follower would move its log start (a DeleteRecords waits for it)
                news = news or (entry.log_start_offset >= 0 and
                                min(result.log_start_offset, entry.fetch_offset) > entry.log_start_offset)
            budget -= len(result.records)
        return results, news

    def _read_for_consumer(
        self, replica: Replica, entry: FetchEntry, max_bytes: int, budget: int
    ) -> FetchPartitionResult:
        plog, core = replica.log, replica.core
        if plog is None or core is None:
            return _error_result(entry.topic, entry.partition,
                                 self._not_here(entry.topic, entry.partition))
        try:
            error = core.check_in_range(entry.fetch_offset)
            if error is not None:
                raise error
            data = self._read(plog, entry, max_bytes, budget, plog.high_watermark)
        except Exception as e:
            return self._result(replica, entry, b"", error=self._read_error(replica, e))
        return self._result(replica, entry, data.records, aborted=_aborted(data))

    def _read_for_follower(
        self, replica: Replica, replica_id: int, replica_epoch: int, entry: FetchEntry,
        max_bytes: int, budget: int, record_position: bool,
    ) -> FetchPartitionResult:
        plog, core = replica.log, replica.core
        if plog is None or core is None or not core.is_leader:
            return _error_result(entry.topic, entry.partition,
                                 self._not_leader(entry.topic, entry.partition))
        decision = core.on_fetch_request(replica_id, entry.fetch_offset, entry.last_fetched_epoch,
                                         self.clock_ms(), record_position, replica_epoch,
                                         entry.log_start_offset)
        if decision.error is not None:
            return self._result(replica, entry, b"", error=decision.error)
        if decision.diverging is not None:
            return self._result(replica, entry, b"", diverging=DivergingEpoch(decision.diverging.epoch,
                                                                              decision.diverging.end_offset))
        if record_position:
            self.trace.record(FOLLOWER_FETCH, entry.topic, entry.partition, entry.fetch_offset, replica_id)
        self._perform(replica, decision.actions)
        try:
            data = self._read(plog, entry, max_bytes, budget, None)
        except Exception as e:
            return self._result(replica, entry, b"", error=self._read_error(replica, e))
        if data.records:
            self.trace.record(FETCH_ANSWERED, entry.topic, entry.partition, data.next_offset, replica_id)
        return self._result(replica, entry, data.records)

    def _read_error(self, replica: Replica, error: Exception) -> KraftError:
        if self._storage_failed(replica, error):
            return KraftError("KAFKA_STORAGE_ERROR", f"{replica.topic}-{replica.partition}: {replica.storage_error}")
        return _as_kraft_error(error)

    @staticmethod
    def _read(plog: PartitionLog, entry: FetchEntry, max_bytes: int, budget: int,
              max_offset: int | None) -> FetchDataInfo:
        """The batches to answer and, for read_committed, the aborted transactions they overlap."""
        limit = plog.log_end_offset if max_offset is None else max_offset
        if entry.read_committed:
            limit = min(limit, plog.last_stable_offset)
        if entry.fetch_offset >= limit or budget <= 0:
            return FetchDataInfo(b"", entry.fetch_offset, entry.fetch_offset, plog.high_watermark,
                                 plog.log_start_offset, plog.log_end_offset, plog.last_stable_offset,
                                 () if entry.read_committed else None)
        # The first partition of a request always gets a batch (Kafka's rule, so a batch larger
        # than max_bytes cannot stall a fetcher); later ones only within budget.
        return plog.read(
            entry.fetch_offset, min(entry.partition_max_bytes, budget),
            max_offset=max_offset, min_one_batch=budget == max_bytes, read_committed=entry.read_committed,
        )

    @staticmethod
    def _result(replica: Replica, entry: FetchEntry, records: bytes,
                error: KraftError | None = None, diverging: DivergingEpoch | None = None,
                aborted: tuple[AbortedTransaction, ...] = ()) -> FetchPartitionResult:
        plog = replica.log
        return FetchPartitionResult(
            entry.topic, entry.partition, plog.high_watermark, plog.log_start_offset,
            plog.log_end_offset, records, diverging,
            error.error_code if error else None, error.message if error else None,
            last_stable_offset=plog.last_stable_offset, aborted_transactions=aborted,
        )

    # -- follower side (the fetchers call these) ----------------------------------------------

    def _following(self, tp: TopicPartition, leader_epoch: int) -> Replica | None:
        replica = self._replicas.get(tp)
        if (replica is None or replica.log is None or replica.core is None
                or not replica.core.is_following(leader_epoch)):
            return None
        return replica

    def fetch_position(self, tp: TopicPartition, leader_epoch: int) -> dict[str, Any] | None:
        replica = self._following(tp, leader_epoch)
        if replica is None:
            return None
        fetch_offset, last_fetched_epoch, high_watermark = replica.core.fetch_position()
        return {"fetch_offset": fetch_offset, "last_fetched_epoch": last_fetched_epoch,
                "high_watermark": high_watermark, "log_start_offset": replica.log.log_start_offset}

    async def on_fetch_response(
        self, tp: TopicPartition, leader_epoch: int, response: PartitionFetchResponse
    ) -> bool:
        replica = self._following(tp, leader_epoch)
        if replica is None:
            return True  # no longer following at this epoch: the answer is moot
        async with replica.lock:
            if self._following(tp, leader_epoch) is not replica:
                return True
            try:
                return self._apply_fetched(replica, response)
            except Exception as e:
                if not self._storage_failed(replica, e):
                    log.warning("%s-%d: cannot apply the leader's answer: %s", tp[0], tp[1], e)
                return False

    def _apply_fetched(self, replica: Replica, response: PartitionFetchResponse) -> bool:
        action = replica.core.on_fetch_response(response, self.clock_ms())
        key = (replica.topic, replica.partition)
        if not isinstance(action, Backoff):
            self._fetch_errors.pop(key, None)
            if isinstance(action, Append) and action.records:
                self._wrote(replica)
                self.trace.record(FOLLOWER_APPEND, replica.topic, replica.partition,
                                  replica.log.log_end_offset, self.node_id)
                self.metrics.replication_bytes_in(replica.topic, len(action.records))
            return True
        if self._fetch_errors.get(key) != action.error_code:  # log transitions, not every retry
            self._fetch_errors[key] = action.error_code
            log.info("%s-%d: the leader answers %s; backing off", replica.topic, replica.partition,
                     action.error_code)
        return False

    # -- ISR changes --------------------------------------------------------------------------

    async def _send_alter_partition(self, replica: Replica, proposal: IsrProposal) -> None:
        assert self.alter_partition is not None
        try:
            committed = await self.alter_partition.alter_partition(replica.topic, replica.partition, proposal)
        except Exception as e:
            if replica.core is not None:
                error_code = getattr(e, "error_code", None) or f"{type(e).__name__}: {e}"
                self._perform(replica, replica.core.on_alter_partition_response(proposal, error_code))
            return
        if replica.core is not None:
            self._perform(replica, replica.core.on_alter_partition_response(proposal, None, committed))

    async def _checkpoint_loop(self) -> None:
        """Kafka's recovery-point checkpoint (log.flush.offset.checkpoint.interval.ms): closed
        segments are fsynced and the recovery point moved past them, in a thread, so a restart
        after kill -9 re-validates only what was written since."""
        while True:
            await asyncio.sleep(self.recovery_point_checkpoint_interval_ms / 1000)
            await self.checkpoint_recovery_points()

    async def checkpoint_recovery_points(self) -> None:
        for replica in list(self._replicas.values()):
            if replica.log is None or not replica.log.on_disk:
                continue
            async with replica.lock:
                if replica.log is None:
                    continue
                try:
                    await asyncio.to_thread(replica.log.flush_closed_segments)
                except Exception as e:
                    if not self._storage_failed(replica, e):
                        log.exception("checkpointing the recovery point of %s-%d failed",
                                      replica.topic, replica.partition)

    async def _offline_loop(self) -> None:
        while True:
            await asyncio.sleep(self.replication.offline_retry_ms / 1000)
            try:
                await self.retry_offline()
            except Exception:
                log.exception("retrying offline replicas failed")

    async def retry_offline(self) -> None:
        """Tries again what a storage error left undone: the role of each replica that went
        offline (`_mark_offline`), and opening each log whose open failed with an OSError. A
        full disk that has space again brings its replicas back."""
        for key in sorted(self._offline):
            replica = self._replicas.get(key)
            if replica is None:
                self._offline.discard(key)
                continue
            if self._closed:
                return
            if not self._log_dir(replica).online:
                self._offline.discard(key)
            elif replica.storage_error is not None and replica.log is not None and replica.core is not None:
                self._apply_role(replica)
            elif isinstance(replica.open_error, OSError) and replica.log is None:
                if replica.is_ready:  # not while an attempt is under way
                    replica.clear_ready()  # requests (and a deletion) wait for this attempt
                    await self._open_replicas([replica])
            elif not replica.offline:  # a metadata change or a re-created topic healed it
                self._offline.discard(key)

    async def _isr_loop(self) -> None:
        """Kafka's isr-expiration task: shrink out followers that stopped catching up."""
        while True:
            await asyncio.sleep(self.replication.isr_check_interval_ms / 1000)
            await self.check_isr()

    async def check_isr(self, joining: frozenset[int] | None = None) -> None:
        """One pass of the isr-expiration task over every local replica, `ISR_CHECK_SLICE` at a
        time with a loop turn between slices: a pass over 50k replicas in one go stalled the
        loop ~170 ms every 15 s (requests and metadata waited), and the pass grows with the
        replicas a broker holds. `joining` (brokers just unfenced): only the partitions led here
        with one of them a replica outside the ISR."""
        replicas = list(self._replicas.values())
        if joining is not None:
            replicas = [r for r in replicas if r.core is not None and r.core.is_leader
                        and not joining.isdisjoint(set(r.state.replicas) - set(r.state.isr))]
        for start in range(0, len(replicas), ISR_CHECK_SLICE):
            if start:
                await asyncio.sleep(0)
            for replica in replicas[start:start + ISR_CHECK_SLICE]:
                core = replica.core
                if core is None:  # not open yet, or deleted since the pass began
                    continue
                try:
                    state = core.state
                    if state is not None and state.leader == self.node_id and not core.is_leader:
                        # named leader, waiting for our registration: the lifecycle's answer may
                        # come after the metadata holding it, and no delta touches this partition
                        self._apply_role(replica)
                    self._perform(replica, core.maybe_shrink_isr(self.clock_ms()))
                except Exception:
                    log.exception("ISR check of %s-%d failed", replica.topic, replica.partition)

    # -- offsets ------------------------------------------------------------------------------

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        plog = (await self._leader_replica(topic, partition)).log
        return PartitionOffsets(plog.log_start_offset, plog.high_watermark, plog.log_end_offset,
                                plog.last_stable_offset)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int, read_committed: bool = False
    ) -> tuple[int, int] | None:
        replica = await self._leader_replica(topic, partition)
        async with replica.lock:
            if replica.log is None:
                raise self._not_here(topic, partition)
            # consumers see nothing at or beyond the high watermark (read_committed ones the LSO)
            plog = replica.log
            bound = plog.last_stable_offset if read_committed else plog.high_watermark
            return await asyncio.to_thread(plog.offset_for_timestamp, timestamp, bound)

    async def offset_for_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset:
        """Kafka's OffsetForLeaderEpoch on the leader (a client checking its position after a
        leader change, KIP-320): the largest epoch <= `leader_epoch` and its end offset, (-1, -1)
        for an epoch above every known one."""
        replica = await self._leader_replica(topic, partition, current_leader_epoch)
        async with replica.lock:
            if replica.log is None:
                raise self._not_here(topic, partition)
            return EpochEndOffset(*replica.log.leader_epoch_cache.end_offset_for(
                leader_epoch, replica.log.log_end_offset))

    # -- retention ----------------------------------------------------------------------------

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_interval_ms / 1000)
            await self.run_retention()

    async def run_retention(self) -> None:
        """One pass of retention and compaction over the local replicas, one at a time."""
        for replica in list(self._replicas.values()):
            if replica.log is None or not replica.log.on_disk:
                continue
            async with replica.lock:
                if replica.log is None:
                    continue
                try:
                    deleted = await asyncio.to_thread(replica.log.delete_old_segments, now_ms())
                    if replica.config.compact:
                        await asyncio.to_thread(replica.log.compact, now_ms())
                except Exception:
                    log.exception("retention of %s-%d failed", replica.topic, replica.partition)
                    continue
            if deleted:
                log.info("retention deleted %d segment(s) of %s-%d", deleted, replica.topic,
                         replica.partition)

    def replica_count(self) -> int:
        return len(self._replicas)

    # -- PartitionStateReader -----------------------------------------------------------------

    def local_partitions(self) -> Iterator[tuple[str, int, PartitionView]]:
        for (topic, partition), replica in list(self._replicas.items()):
            yield topic, partition, replica.view()

    def partition_state(self, topic: str, partition: int) -> PartitionView | None:
        replica = self._replicas.get((topic, partition))
        return None if replica is None else replica.view()

    def replica(self, topic: str, partition: int) -> Replica | None:
        return self._replicas.get((topic, partition))

    async def active_producers(self, topic: str, partition: int) -> list[ActiveProducer]:
        """The producers the leader of the partition keeps state for (DescribeProducers): the last
        coordinator epoch of their markers and their open transaction's first offset (-1: none)."""
        replica = await self._leader_replica(topic, partition)
        return [ActiveProducer(e.producer_id, e.producer_epoch, e.last_sequence, e.last_timestamp,
                               e.coordinator_epoch, e.current_txn_first_offset)
                for e in replica.log.producer_state.entries()]


def _error_result(topic: str, partition: int, error: KraftError,
                  leader: dict[str, Any] | None = None) -> FetchPartitionResult:
    return FetchPartitionResult(topic, partition, -1, -1, -1, b"", None, error.error_code,
                              error.message, leader)


def _aborted(data: FetchDataInfo) -> tuple[AbortedTransaction, ...]:
    """The aborted transactions a read_committed read overlaps (none for read_uncommitted)."""
    return tuple(AbortedTransaction(t.producer_id, t.first_offset) for t in data.aborted_transactions or ())


def _as_kraft_error(exc: BaseException) -> KraftError:
    error = from_exception(exc)
    if error.error_code == "UNKNOWN_SERVER_ERROR":
        log.error("unexpected error: %r", exc, exc_info=exc)
    return error

"""TransactionCoordinator: Kafka's transaction coordinator (KIP-98) on the coordinator runtime.

The coordinator of a transactional id leads `__transaction_state` partition
`abs(hashCode(id)) % transaction.state.log.num.partitions` (`CoordinatorRouter`); the partition's
records are the truth (`TransactionShard`), so a new leader rebuilds every id's state by
replaying it and finishes what the old one left half done (markers of a Prepare state, timers of
an Ongoing transaction).

Requests (the service layer calls these):
- `init_producer_id`: a new id gets a producer id (from the controller's blocks) at epoch 0; a
  known one its epoch bumped, which fences the previous producer; an open transaction of the old
  producer is aborted first (CONCURRENT_TRANSACTIONS: the client retries);
- `add_partitions` / `add_offsets`: the partitions join the transaction (logged), then their
  leaders are told (KIP-890: they refuse its first batch otherwise); a leader that changes while
  the transaction is open is told again (`on_leaders_changed`, and on load: `LeaderVerifications`);
- `end_transaction`: PrepareCommit/PrepareAbort is logged and answered; the markers go to every
  partition's leader (`TxnPartitionLeaders`), retried until written (a deleted partition is
  skipped), then CompleteCommit/CompleteAbort is logged;
- `describe` / `list`: the committed state of the ids this broker coordinates.
The markers carry the coordinator epoch: the leader epoch of the `__transaction_state` partition,
so a deposed coordinator's late markers are refused TRANSACTION_COORDINATOR_FENCED.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol, TypeVar

from kraft.broker.groups.hashing import OFFSETS_TOPIC, coordinator_partition
from kraft.broker.metadata_view import MetadataCache
from kraft.broker.transactions.partition_leaders import TxnPartitionLeaders
from kraft.broker.transactions.records import TRANSACTION_STATE_TOPIC
from kraft.broker.transactions.shard import ProducerIdAndEpoch, TransactionShard
from kraft.broker.transactions.state import (
    TopicPartition, TransactionMetadata, TxnError, TxnState, check_timeout, needs_new_producer_id,
    verify_partitions,
)
from kraft.broker.transactions.verification import LeaderVerifications
from kraft.coordinator.partition_writer import PartitionWriter
from kraft.coordinator.result import CoordinatorResult
from kraft.coordinator.router import CoordinatorRouter, TopicCreator
from kraft.coordinator.runtime import CoordinatorRuntime, RuntimeSettings
from kraft.coordinator.timer import Scheduler
from kraft.errors import KraftError
from kraft.metadata.image import MetadataImage
from kraft.metrics import SampledStat
from kraft.server.transactions import FindTransactionCoordinatorResult, TransactionDescription, TransactionProducer

log = logging.getLogger("kraft.transactions")

COORDINATOR_WAIT_S = 15.0
T = TypeVar("T")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TransactionSettings:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    replication_factor: int = 3  # transaction.state.log.replication.factor (capped at the brokers)
    min_isr: int = 2  # transaction.state.log.min.isr
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    id_expiration_check_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    marker_retry_backoff_ms: int = 100
    marker_retry_max_backoff_ms: int = 2_000
    runtime: RuntimeSettings = RuntimeSettings()


@dataclass
class TransactionStats:
    """What the coordinator counts for its metrics (kraft/metrics.py reads it at scrape time):
    partition loads (Kafka's transaction-coordinator-metrics partition-load-time), markers
    written and transactions completed, by result."""

    load_time_ms: SampledStat = field(default_factory=SampledStat)
    markers: dict[str, int] = field(default_factory=lambda: {"COMMIT": 0, "ABORT": 0})
    completed: dict[str, int] = field(default_factory=lambda: {"COMMIT": 0, "ABORT": 0})


def _result(commit: bool) -> str:
    return "COMMIT" if commit else "ABORT"


class ProducerIds(Protocol):
    async def allocate_producer_id(self) -> int: ...


def _error(e: TxnError) -> KraftError:
    return KraftError(e.error_code, e.message)


class TransactionCoordinator:
    def __init__(self, node_id: int, writer: PartitionWriter, admin: TopicCreator, producer_ids: ProducerIds,
                 leaders: TxnPartitionLeaders, settings: TransactionSettings,
                 clock: Callable[[], int] = now_ms, metadata_cache: MetadataCache | None = None,
                 scheduler: Scheduler | None = None) -> None:
        self.node_id = node_id
        self.settings = settings
        self.producer_ids = producer_ids
        self.leaders = leaders
        self.metadata_cache = metadata_cache or MetadataCache()
        self.runtime: CoordinatorRuntime[TransactionShard] = CoordinatorRuntime(
            TRANSACTION_STATE_TOPIC, writer, self._new_shard, clock, settings.runtime, scheduler)
        self.router: CoordinatorRouter[TransactionShard] = CoordinatorRouter(
            node_id, self.runtime, self.metadata_cache, admin, settings.num_partitions,
            settings.replication_factor,
            # min.isr capped at the replication factor: a single broker's transactions work
            lambda rf: {"cleanup.policy": "compact", "min.insync.replicas": str(min(settings.min_isr, rf))},
            COORDINATOR_WAIT_S)
        self._completing: dict[str, asyncio.Task[None]] = {}
        self.verifications = LeaderVerifications(
            leaders.verify_transaction, lambda: self.image, self._current,
            settings.marker_retry_backoff_ms, settings.marker_retry_max_backoff_ms)
        self.stats = TransactionStats()
        self.runtime.on_load = lambda seconds: self.stats.load_time_ms.record(seconds * 1000, time.monotonic())

    def _new_shard(self, partition: int) -> TransactionShard:
        return TransactionShard(partition, self._on_prepare, self.settings.id_expiration_ms,
                                self.settings.id_expiration_check_interval_ms, self._on_ongoing)

    @property
    def image(self) -> MetadataImage:
        return self.metadata_cache.image

    async def close(self) -> None:
        for task in list(self._completing.values()):
            task.cancel()
        await self.verifications.close()
        await self.runtime.close()
        await self.leaders.close()

    # -- requests -----------------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str) -> FindTransactionCoordinatorResult:
        partition, coordinator = await self.router.find(transactional_id)
        return FindTransactionCoordinatorResult(transactional_id, partition, coordinator)

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> TransactionProducer:
        """`expected`: the producer id and epoch of a producer re-initialising itself (KIP-360)."""
        try:
            check_timeout(timeout_ms, self.settings.max_timeout_ms)
        except TxnError as e:
            raise _error(e) from None
        await self.router.ensure_topic()
        partition, shard = await self.router.shard(transactional_id, f"transactional id {transactional_id!r}")
        # a new id, or one whose epoch is exhausted, takes a fresh producer id (allocated before
        # its turn: the handler cannot wait; an unused one is skipped, as Kafka's are)
        current = shard.transactions.get(transactional_id)
        new_pid = await self.producer_ids.allocate_producer_id() if needs_new_producer_id(current) else -1
        answer: ProducerIdAndEpoch = await self._write(partition, "init-producer-id", lambda s, now: s.init_producer_id(
            now, transactional_id=transactional_id, timeout_ms=timeout_ms, new_producer_id=new_pid,
            expected=expected))
        if answer.error is not None:
            raise KraftError(answer.error, f"the open transaction of {transactional_id!r} is being aborted: retry")
        return TransactionProducer(answer.producer_id, answer.producer_epoch)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]:
        """Kafka's AddPartitionsToTxn: each partition's error name (None: added). A partition that
        does not exist fails the whole request (UNKNOWN_TOPIC_OR_PARTITION), as Kafka's does."""
        wanted = sorted(set(partitions))
        image = self.image
        missing = [tp for tp in wanted if image.partition(*tp) is None]
        if missing:
            return {tp: "UNKNOWN_TOPIC_OR_PARTITION" if tp in missing else "OPERATION_NOT_ATTEMPTED"
                    for tp in wanted}
        await self._add(transactional_id, producer_id, producer_epoch, wanted)
        return dict(zip(wanted, await asyncio.gather(*(
            self._verify(tp, producer_id, producer_epoch) for tp in wanted))))

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> None:
        """Kafka's AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the
        transaction (its TxnOffsetCommit then goes to the group coordinator)."""
        offsets = self.image.topic_by_name(OFFSETS_TOPIC)
        if offsets is None:  # the group's FindCoordinator creates it (the client asks it first)
            raise KraftError("COORDINATOR_NOT_AVAILABLE", f"{OFFSETS_TOPIC} does not exist yet")
        tp = (OFFSETS_TOPIC, coordinator_partition(group_id, len(offsets.partitions)))
        await self._add(transactional_id, producer_id, producer_epoch, [tp])
        error = await self._verify(tp, producer_id, producer_epoch)
        if error is not None:
            raise KraftError(error, f"{tp[0]}-{tp[1]} could not be added to the transaction")

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool, bump_epoch: bool = False) -> TransactionProducer:
        """Kafka's EndTxn: answered once PrepareCommit/PrepareAbort is logged (the markers follow),
        with the producer id and epoch after it (`bump_epoch`: EndTxn v5 bumps the epoch)."""
        partition, _ = await self.router.shard(transactional_id, f"transactional id {transactional_id!r}")
        answer: ProducerIdAndEpoch = await self._write(partition, "end-txn", lambda s, now: s.end_transaction(
            now, transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, commit=commit, bump_epoch=bump_epoch))
        return TransactionProducer(answer.producer_id, answer.producer_epoch)

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]:
        """AddPartitionsToTxn v4+ `verify_only`: whether each partition is in the producer's open
        transaction (its committed state; nothing is written)."""
        _, shard = await self.router.shard(transactional_id, f"transactional id {transactional_id!r}")
        try:
            return verify_partitions(shard.transactions.get(transactional_id), transactional_id, producer_id,
                                     producer_epoch, partitions)
        except TxnError as e:
            raise _error(e) from None

    async def describe(self, transactional_id: str) -> TransactionDescription:
        if not self.router.exists():
            raise KraftError("TRANSACTIONAL_ID_NOT_FOUND", f"transactional id {transactional_id!r} is unknown")
        _, shard = await self.router.shard(transactional_id, f"transactional id {transactional_id!r}")
        meta = shard.transactions.get(transactional_id)
        if meta is None:
            raise KraftError("TRANSACTIONAL_ID_NOT_FOUND", f"transactional id {transactional_id!r} is unknown")
        return self._describe(meta)

    def list(self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()) -> list[TransactionDescription]:
        """Kafka's ListTransactions on this broker: the ids it coordinates, filtered by state
        and producer id (no filter: all)."""
        wanted_states, wanted_pids = set(states), set(producer_ids)
        return sorted((self._describe(meta) for _, shard in self.runtime.active_shards()
                       for meta in shard.transactions.values()
                       if (not wanted_states or meta.state.value in wanted_states)
                       and (not wanted_pids or meta.producer_id in wanted_pids)),
                      key=lambda d: d.transactional_id)

    def _describe(self, meta: TransactionMetadata) -> TransactionDescription:
        return TransactionDescription(meta.transactional_id, self.node_id, meta.state.value, meta.producer_id,
                                      meta.producer_epoch, meta.timeout_ms, meta.txn_start_timestamp,
                                      tuple(sorted(meta.partitions)))

    # -- KIP-890's verification at new leaders -------------------------------------------------

    def on_leaders_changed(self, partitions: Iterable[TopicPartition]) -> None:
        """The metadata moved these partitions' leadership (a new leader epoch): the Ongoing
        transactions this broker coordinates that hold one verify it at its new leader."""
        moved = set(partitions)
        if not moved:
            return
        for partition, shard in self.runtime.active_shards():
            for meta in shard.ongoing.values():
                if not moved.isdisjoint(meta.partitions):
                    self.verifications.push(partition, meta, moved & meta.partitions)

    def _on_ongoing(self, partition: int, meta: TransactionMetadata) -> None:
        self.verifications.push(partition, meta, meta.partitions)

    def _current(self, partition: int, transactional_id: str) -> TransactionMetadata | None:
        shard = self.runtime.active_shard(partition)
        return None if shard is None else shard.transactions.get(transactional_id)

    # -- helpers ------------------------------------------------------------------------------

    async def _add(self, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions: list[TopicPartition]) -> None:
        partition, _ = await self.router.shard(transactional_id, f"transactional id {transactional_id!r}")
        await self._write(partition, "add-partitions", lambda s, now: s.add_partitions(
            now, transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, partitions=partitions))

    async def _verify(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> str | None:
        """KIP-890: the partition's leader may take the transaction's first batch."""
        try:
            await self.leaders.verify_transaction(tp, producer_id, producer_epoch)
        except KraftError as e:
            return e.error_code
        return None

    async def _write(self, partition: int, name: str,
                     operation: Callable[[TransactionShard, int], CoordinatorResult[T]]) -> T:
        def run(shard: TransactionShard, now: int) -> CoordinatorResult[T]:
            try:
                return operation(shard, now)
            except TxnError as e:
                raise _error(e) from None
        return await self.runtime.write(partition, name, run)

    # -- markers ------------------------------------------------------------------------------

    def _on_prepare(self, partition: int, meta: TransactionMetadata) -> None:
        """A transaction entered (or was loaded in) PrepareCommit/PrepareAbort: its markers."""
        tid = meta.transactional_id
        running = self._completing.get(tid)
        if running is not None and not running.done():
            running.cancel()  # a newer state of the same id (a reload): this one supersedes it
        task = asyncio.get_running_loop().create_task(self._complete(partition, meta), name=f"txn markers {tid}")
        self._completing[tid] = task
        task.add_done_callback(lambda t: self._completing.pop(tid, None) if self._completing.get(tid) is t else None)

    async def _complete(self, partition: int, meta: TransactionMetadata) -> None:
        commit = meta.state is TxnState.PREPARE_COMMIT
        await self.verifications.settle(meta.transactional_id)
        reg = self.image.partition(TRANSACTION_STATE_TOPIC, partition)
        coordinator_epoch = reg.leader_epoch if reg is not None else 0
        await asyncio.gather(*(self._marker(partition, tp, meta, coordinator_epoch, commit)
                               for tp in sorted(meta.partitions)))
        tid = meta.transactional_id
        while self.runtime.is_coordinator(partition):
            try:
                await self.runtime.write(partition, "complete-txn", lambda s, now: s.complete(
                    now, transactional_id=tid, producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch, state=meta.state))
                log.info("transaction of %r (producer %d epoch %d) %s", tid, meta.producer_id,
                         meta.producer_epoch, "committed" if commit else "aborted")
                self.stats.completed[_result(commit)] += 1
                return
            except KraftError as e:
                if e.error_code == "NOT_COORDINATOR":
                    return  # the next coordinator loads it in its Prepare state and finishes it
                log.info("completing the transaction of %r waits: %s", tid, e)
                await asyncio.sleep(self.settings.marker_retry_backoff_ms / 1000)

    async def _marker(self, partition: int, tp: TopicPartition, meta: TransactionMetadata,
                      coordinator_epoch: int, commit: bool) -> None:
        """Writes the marker at `tp`'s leader, retrying every failure (Kafka's marker channel
        retries until the partition is gone or this broker no longer coordinates)."""
        backoff = self.settings.marker_retry_backoff_ms
        while self.runtime.is_coordinator(partition):
            try:
                await self.leaders.write_txn_marker(tp, meta.producer_id, meta.producer_epoch,
                                                    coordinator_epoch, commit)
                self.stats.markers[_result(commit)] += 1
                return
            except KraftError as e:
                if self.image.partition(*tp) is None:
                    log.info("%s-%d is gone: no marker for the transaction of %r", tp[0], tp[1],
                             meta.transactional_id)
                    return
                if e.error_code in ("INVALID_PRODUCER_EPOCH", "TRANSACTION_COORDINATOR_FENCED"):
                    # Kafka's channel gives up on these: a newer epoch or coordinator ended it
                    log.warning("marker of %r at %s-%d refused: %s", meta.transactional_id, tp[0], tp[1], e)
                    return
                log.info("marker of %r at %s-%d waits: %s", meta.transactional_id, tp[0], tp[1], e)
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, self.settings.marker_retry_max_backoff_ms)

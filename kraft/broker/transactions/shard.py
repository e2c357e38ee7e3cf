"""TransactionShard: the state machine of one `__transaction_state` partition on the coordinator
runtime (Kafka's `TransactionStateManager` for one partition): the transactional ids its records
fold into, and the handlers that answer requests with the record to append (`state`'s rules).

Every state change is a record, replayed here after commit, exactly as a load after failover
replays it; every `transaction.remove.expired.transaction.cleanup.interval.ms` a timer writes the
tombstones of the ids idle for `transactional.id.expiration.ms` (`state.expired`). Two things
follow a replayed record once the partition is loaded:
- an Ongoing transaction has a timer at its deadline (`transaction.timeout.ms` from its start),
  which aborts it under a bumped epoch (`state.timed_out`);
- a transaction entering PrepareCommit/PrepareAbort (and every one a load finds there) is handed
  to `on_prepare`, the coordinator's marker channel, which writes the markers and then calls
  `complete`;
- every Ongoing transaction a load finds is handed to `on_ongoing`: the coordinator verifies its
  partitions at their current leaders again (KIP-890, `verification.py`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable

from kraft.broker.transactions.records import (
    TRANSACTION_STATE_TOPIC, TransactionsReplay, record, transaction_key,
)
from kraft.broker.transactions.state import (
    TopicPartition, TransactionMetadata, Transition, TxnState, add_partitions, complete,
    end_transaction, expired, init_producer_id, timed_out,
)
from kraft.coordinator.result import (
    CancelTimer, CoordinatorRecord, CoordinatorResult, ScheduleTimer, TimerChange,
)

log = logging.getLogger("kraft.transactions")


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int
    error: str | None = None  # answered after the record is logged (CONCURRENT_TRANSACTIONS)


ID_EXPIRY = ("txn-id-expiry",)


def _timeout_key(transactional_id: str) -> tuple[str, str]:
    return ("txn-timeout", transactional_id)


class TransactionShard:
    def __init__(self, partition: int, on_prepare: Callable[[int, TransactionMetadata], None],
                 id_expiration_ms: int = 604_800_000, id_expiration_check_interval_ms: int = 3_600_000,
                 on_ongoing: Callable[[int, TransactionMetadata], None] = lambda partition, meta: None) -> None:
        """`on_prepare(partition, metadata)`: a transaction to end with markers (called once the
        partition is loaded, for each that enters or is found in a Prepare state);
        `on_ongoing(partition, metadata)`: each Ongoing transaction a load finds (its partitions'
        leaders are verified again)."""
        self.partition = partition
        self.on_prepare = on_prepare
        self.on_ongoing = on_ongoing
        self.id_expiration_ms = id_expiration_ms
        self.id_expiration_check_interval_ms = id_expiration_check_interval_ms
        self._state = TransactionsReplay()
        self._loaded = False

    @property
    def transactions(self) -> dict[str, TransactionMetadata]:
        """The committed metadata, by transactional id (read-only to everyone but `replay`)."""
        return self._state.transactions

    @property
    def ongoing(self) -> dict[str, TransactionMetadata]:
        """The committed metadata of the Ongoing transactions, by transactional id (read-only)."""
        return self._state.ongoing

    # -- CoordinatorShard ---------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        meta = self._state.replay(record.key, record.value)
        if self._loaded and meta is not None and meta.state.is_prepare:
            self.on_prepare(self.partition, meta)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """`__transaction_state` holds no transactional records: no marker is ever written to it."""

    def on_unloaded(self) -> None:
        """Nothing waits on a transaction shard's state: its requests are answered by their own writes."""

    def on_loaded(self, now_ms: int) -> tuple[TimerChange, ...]:
        self._loaded = True
        timers: list[TimerChange] = [self._expiry_timer(now_ms)]
        for meta in self.transactions.values():
            if meta.state is TxnState.ONGOING:
                timers.append(self._timeout_timer(meta))
                self.on_ongoing(self.partition, meta)
            elif meta.state.is_prepare:
                self.on_prepare(self.partition, meta)
        log.info("%s-%d: %d transactional ids loaded%s", TRANSACTION_STATE_TOPIC, self.partition,
                 len(self.transactions),
                 f" ({self._state.skipped} undecodable records skipped)" if self._state.skipped else "")
        return tuple(timers)

    # -- handlers -----------------------------------------------------------------------------

    def init_producer_id(self, now_ms: int, *, transactional_id: str, timeout_ms: int,
                         new_producer_id: int, expected: tuple[int, int] | None = None,
                         ) -> CoordinatorResult[ProducerIdAndEpoch]:
        transition = init_producer_id(self.transactions.get(transactional_id), transactional_id,
                                      timeout_ms, new_producer_id, now_ms, expected)
        assert transition.metadata is not None
        meta = transition.metadata
        return self._result(transactional_id, transition,
                            ProducerIdAndEpoch(meta.producer_id, meta.producer_epoch, transition.error))

    def add_partitions(self, now_ms: int, *, transactional_id: str, producer_id: int,
                       producer_epoch: int, partitions: Iterable[TopicPartition]) -> CoordinatorResult[None]:
        transition = add_partitions(self.transactions.get(transactional_id), transactional_id,
                                    producer_id, producer_epoch, partitions, now_ms)
        return self._result(transactional_id, transition, None)

    def end_transaction(self, now_ms: int, *, transactional_id: str, producer_id: int,
                        producer_epoch: int, commit: bool, bump_epoch: bool = False
                        ) -> CoordinatorResult[ProducerIdAndEpoch]:
        """Answers the producer id and epoch after the end (bumped by `bump_epoch`: EndTxn v5)."""
        current = self.transactions.get(transactional_id)
        transition = end_transaction(current, transactional_id, producer_id, producer_epoch, commit, now_ms,
                                     bump_epoch)
        meta = transition.metadata or current
        assert meta is not None  # end_transaction refuses an unknown id
        return self._result(transactional_id, transition, ProducerIdAndEpoch(meta.producer_id, meta.producer_epoch))

    def complete(self, now_ms: int, *, transactional_id: str, producer_id: int, producer_epoch: int,
                 state: TxnState) -> CoordinatorResult[None]:
        """The markers of the transaction that was `state` at that producer id and epoch are
        written: it completes (nothing, when it moved on meanwhile: a reload sent them again)."""
        meta = self.transactions.get(transactional_id)
        if meta is None or (meta.producer_id, meta.producer_epoch, meta.state) != (producer_id, producer_epoch, state):
            return CoordinatorResult((), None)
        return self._result(transactional_id, Transition(complete(meta, now_ms)), None)

    def abort_timed_out(self, now_ms: int, *, transactional_id: str) -> CoordinatorResult[None]:
        """The transaction timer: an Ongoing transaction past its deadline is aborted, fencing
        its producer (a timer that finds it moved on does nothing)."""
        meta = self.transactions.get(transactional_id)
        aborted = None if meta is None else timed_out(meta, now_ms)
        if aborted is None:
            return CoordinatorResult((), None)
        log.info("transaction of %r (producer %d) timed out after %d ms: aborting it", transactional_id,
                 aborted.producer_id, aborted.timeout_ms)
        return self._result(transactional_id, Transition(aborted), None)

    def expire_transactional_ids(self, now_ms: int) -> CoordinatorResult[int]:
        """Kafka's removeExpiredTransactionalIds for this partition: a tombstone for each id idle
        for `transactional.id.expiration.ms`, then the next check. Answers how many."""
        gone = sorted(tid for tid, meta in self.transactions.items()
                      if expired(meta, now_ms, self.id_expiration_ms))
        if gone:
            log.info("%s-%d: removing %d expired transactional ids", TRANSACTION_STATE_TOPIC, self.partition,
                     len(gone))
        return CoordinatorResult(tuple((transaction_key(tid), None) for tid in gone), len(gone),
                                 (self._expiry_timer(now_ms),))

    # -- helpers ------------------------------------------------------------------------------

    def _expiry_timer(self, now_ms: int) -> ScheduleTimer:
        return ScheduleTimer(ID_EXPIRY, now_ms + self.id_expiration_check_interval_ms,
                             TransactionShard.expire_transactional_ids)

    def _result(self, transactional_id: str, transition: Transition, response: object) -> CoordinatorResult:  # type: ignore[type-arg]
        meta = transition.metadata
        if meta is None:
            return CoordinatorResult((), response)
        timers: tuple[TimerChange, ...] = (
            (self._timeout_timer(meta),) if meta.state is TxnState.ONGOING
            else (CancelTimer(_timeout_key(transactional_id)),))
        return CoordinatorResult((record(meta),), response, timers)

    def _timeout_timer(self, meta: TransactionMetadata) -> ScheduleTimer:
        deadline = meta.deadline_ms
        assert deadline is not None, meta
        tid = meta.transactional_id
        return ScheduleTimer(_timeout_key(tid), deadline,
                             lambda shard, now: shard.abort_timed_out(now, transactional_id=tid))

"""A transactional id's state and the coordinator's rules over it (pure), after Kafka's
`TransactionMetadata` and `TransactionCoordinator`.

`TransactionMetadata` is an immutable value: what one `__transaction_state` record says of a
transactional id. Each rule takes the committed metadata and a request and either raises
`TxnError` (Kafka's error name) or returns the `Transition` to log: the metadata the record
will carry (None: nothing to write) and whether the request then succeeds.

States and the moves between them (Kafka's `TransactionState.validPreviousStates`):

    Empty ──AddPartitions──► Ongoing ──EndTxn──► PrepareCommit ──markers──► CompleteCommit
      ▲                         │   └──EndTxn / timeout / fence──► PrepareAbort ──► CompleteAbort
      └──InitProducerId (epoch + 1) ◄── CompleteCommit, CompleteAbort, Empty

Kafka's in-memory PrepareEpochFence is one record here: fencing an open transaction (a new
InitProducerId, or the transaction timeout) logs PrepareAbort with the epoch already bumped, so
the old producer's next request is PRODUCER_FENCED and the abort markers carry the new epoch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Iterable

MAX_EPOCH = 2**15 - 1  # Short.MAX_VALUE: an exhausted epoch gets a new producer id
NO_PRODUCER_ID = -1

TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


class TxnError(Exception):
    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    txn_start_timestamp: int = -1  # when the open transaction began (-1: none)
    txn_last_update_timestamp: int = -1

    def __post_init__(self) -> None:
        assert 0 <= self.producer_epoch <= MAX_EPOCH, self.producer_epoch
        assert self.producer_id >= 0, self.producer_id
        # only an open or ending transaction names partitions
        assert not self.partitions or self.state in (
            TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT), self

    @property
    def deadline_ms(self) -> int | None:
        """When an Ongoing transaction times out."""
        if self.state is not TxnState.ONGOING:
            return None
        return self.txn_start_timestamp + self.timeout_ms


@dataclass(frozen=True)
class Transition:
    """`metadata`: the record to log (None: nothing changes). `error`: the error the request
    answers once it is logged (InitProducerId fencing an open transaction answers
    CONCURRENT_TRANSACTIONS and the client retries)."""

    metadata: TransactionMetadata | None
    error: str | None = None


def check_timeout(timeout_ms: int, max_timeout_ms: int) -> None:
    if timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        raise TxnError("INVALID_TRANSACTION_TIMEOUT",
                       f"transaction.timeout.ms {timeout_ms} is outside (0, transaction.max.timeout.ms "
                       f"{max_timeout_ms}]")


def needs_new_producer_id(current: TransactionMetadata | None) -> bool:
    """InitProducerId will use a new producer id: the id is new, or its epoch cannot be bumped."""
    return current is None or current.producer_epoch >= MAX_EPOCH - 1


def init_producer_id(current: TransactionMetadata | None, transactional_id: str, timeout_ms: int,
                     new_producer_id: int, now_ms: int, expected: tuple[int, int] | None = None) -> Transition:
    """Kafka's handleInitProducerId for a transactional id. `new_producer_id` is used when the id
    is new or its epoch is exhausted (the caller allocated it beforehand, -1 when it saw no need:
    another request changed the id meanwhile, and the client asks again). `expected`: the
    producer id and epoch a producer re-initialising itself sends (KIP-360, InitProducerId v3+);
    any but the current ones are PRODUCER_FENCED, so a zombie cannot bump the epoch past the
    producer that fenced it (stricter than Kafka, which also takes a retry of the last bump)."""
    if needs_new_producer_id(current) and new_producer_id < 0:
        raise TxnError("CONCURRENT_TRANSACTIONS", f"{transactional_id!r} changed meanwhile: retry")
    if current is None:
        return Transition(TransactionMetadata(transactional_id, new_producer_id, 0, timeout_ms,
                                              TxnState.EMPTY, txn_last_update_timestamp=now_ms))
    if current.state.is_prepare:
        raise TxnError("CONCURRENT_TRANSACTIONS", f"transaction of {transactional_id!r} is "
                       f"{current.state.value}: retry once its markers are written")
    if expected is not None and expected != (current.producer_id, current.producer_epoch):
        raise TxnError("PRODUCER_FENCED", f"producer {expected[0]} epoch {expected[1]} of {transactional_id!r} "
                       f"is fenced by producer {current.producer_id} epoch {current.producer_epoch}")
    if current.state is TxnState.ONGOING:
        # the previous producer's transaction is aborted under a bumped epoch: it is fenced
        return Transition(_fenced_abort(current, now_ms), error="CONCURRENT_TRANSACTIONS")
    if needs_new_producer_id(current):
        pid, epoch = new_producer_id, 0
    else:
        pid, epoch = current.producer_id, current.producer_epoch + 1
    return Transition(replace(current, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms,
                              state=TxnState.EMPTY, partitions=frozenset(), txn_start_timestamp=-1,
                              txn_last_update_timestamp=now_ms))


def _check_producer(current: TransactionMetadata | None, transactional_id: str, producer_id: int,
                    producer_epoch: int) -> TransactionMetadata:
    if current is None or current.producer_id != producer_id:
        raise TxnError("INVALID_PRODUCER_ID_MAPPING", f"producer id {producer_id} is not the one of "
                       f"transactional id {transactional_id!r}")
    if producer_epoch != current.producer_epoch:
        raise TxnError("PRODUCER_FENCED", f"producer {producer_id} epoch {producer_epoch} of "
                       f"{transactional_id!r} is fenced by epoch {current.producer_epoch}")
    return current


def add_partitions(current: TransactionMetadata | None, transactional_id: str, producer_id: int,
                   producer_epoch: int, partitions: Iterable[TopicPartition], now_ms: int) -> Transition:
    """Kafka's handleAddPartitionsToTransaction (AddOffsetsToTxn adds the group's
    `__consumer_offsets` partition the same way)."""
    meta = _check_producer(current, transactional_id, producer_id, producer_epoch)
    wanted = frozenset(partitions)
    if meta.state.is_prepare:
        raise TxnError("CONCURRENT_TRANSACTIONS", f"transaction of {transactional_id!r} is "
                       f"{meta.state.value}: retry once it completes")
    if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
        return Transition(None)
    start = meta.txn_start_timestamp if meta.state is TxnState.ONGOING else now_ms
    return Transition(replace(meta, state=TxnState.ONGOING, partitions=meta.partitions | wanted,
                              txn_start_timestamp=start, txn_last_update_timestamp=now_ms))


def end_transaction(current: TransactionMetadata | None, transactional_id: str, producer_id: int,
                    producer_epoch: int, commit: bool, now_ms: int, bump_epoch: bool = False) -> Transition:
    """Kafka's handleEndTransaction from a client: Ongoing moves to PrepareCommit/PrepareAbort; a
    retry of an EndTxn already done succeeds, of one still ending is CONCURRENT_TRANSACTIONS.

    `bump_epoch`: transaction version 2 (EndTxn v5, KIP-890 part 2): the end bumps the producer
    epoch (the markers carry the new one, so a late batch of the ended transaction is fenced),
    a retry is recognised by the epoch before the bump, and an abort with no transaction open
    bumps the epoch too. At the last epoch (32767) the epoch is kept (Kafka moves to a new
    producer id there; here the producer's next InitProducerId does)."""
    wanted = "commit" if commit else "abort"
    done, ending = ((TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit
                    else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT))
    if (bump_epoch and current is not None and current.producer_id == producer_id
            and producer_epoch == current.producer_epoch - 1 and current.state in (done, ending)):
        if current.state is ending:  # a retry of the bumping EndTxn while its markers are written
            raise TxnError("CONCURRENT_TRANSACTIONS", f"the {wanted} of {transactional_id!r} is under way")
        return Transition(None)
    meta = _check_producer(current, transactional_id, producer_id, producer_epoch)
    state = meta.state
    epoch = min(meta.producer_epoch + 1, MAX_EPOCH) if bump_epoch else meta.producer_epoch
    if state is TxnState.ONGOING:
        return Transition(replace(meta, producer_epoch=epoch, state=ending, txn_last_update_timestamp=now_ms))
    if bump_epoch and not commit and (state is TxnState.EMPTY or state.is_complete):
        return Transition(replace(meta, producer_epoch=epoch, state=ending, txn_last_update_timestamp=now_ms))
    if state is done and not bump_epoch:
        return Transition(None)
    if state is ending:
        raise TxnError("CONCURRENT_TRANSACTIONS", f"the {wanted} of {transactional_id!r} is under way")
    raise TxnError("INVALID_TXN_STATE", f"cannot {wanted} the transaction of {transactional_id!r}: "
                   f"it is {state.value}")


def verify_partitions(current: TransactionMetadata | None, transactional_id: str, producer_id: int,
                      producer_epoch: int, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]:
    """Kafka's handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4+ `verify_only`, a
    broker asking before it appends a transactional batch): each partition's error, None when
    it is in the producer's open transaction, INVALID_TXN_STATE when it is not."""
    meta = _check_producer(current, transactional_id, producer_id, producer_epoch)
    if meta.state.is_prepare:
        raise TxnError("CONCURRENT_TRANSACTIONS", f"transaction of {transactional_id!r} is "
                       f"{meta.state.value}: retry once it completes")
    return {tp: None if tp in meta.partitions else "INVALID_TXN_STATE" for tp in partitions}


def complete(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Every partition has its marker: PrepareX becomes CompleteX, the partitions are done."""
    assert current.state.is_prepare, current
    state = TxnState.COMPLETE_COMMIT if current.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return replace(current, state=state, partitions=frozenset(), txn_start_timestamp=-1,
                   txn_last_update_timestamp=now_ms)


def timed_out(current: TransactionMetadata, now_ms: int) -> TransactionMetadata | None:
    """Kafka's abortTimedOutTransactions for one id: an Ongoing transaction past its timeout is
    aborted under a bumped epoch (its producer is fenced); None when it is not due."""
    deadline = current.deadline_ms
    if deadline is None or now_ms < deadline:
        return None
    return _fenced_abort(current, now_ms)


def expired(current: TransactionMetadata, now_ms: int, expiration_ms: int) -> bool:
    """Kafka's transactional.id.expiration: an id with no transaction open or ending whose last
    request is `expiration_ms` old is forgotten (its producer id and epoch with it)."""
    idle = current.state is TxnState.EMPTY or current.state.is_complete
    return idle and current.txn_last_update_timestamp + expiration_ms <= now_ms


def _fenced_abort(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    # an exhausted epoch cannot be bumped: the abort keeps it (the next InitProducerId moves to
    # a new producer id, which fences the old one as well)
    epoch = min(current.producer_epoch + 1, MAX_EPOCH)
    return replace(current, producer_epoch=epoch, state=TxnState.PREPARE_ABORT,
                   txn_last_update_timestamp=now_ms)

"""The client side of transactions (Kafka's producer TransactionManager): the transactional id's
state, its coordinator, and the partitions added to the open transaction.

States (Kafka's): UNINITIALIZED -> init_transactions -> READY -> begin_transaction ->
IN_TRANSACTION -> commit/abort -> READY. An error is *abortable* (the transaction can still be
aborted and the producer used again: a failed send, a refused partition) or *fatal* (the producer
must be closed: it was fenced by a newer instance, or is not authorized), as Kafka classes them.

The coordinator's retriable answers are retried here (CONCURRENT_TRANSACTIONS while a previous
transaction's markers are written, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR: find it again)
within `timeout_s`.

A transaction can also be *prepared* (KIP-939's two-phase participant): its records and offsets
are written, and what ends it (id, producer id and epoch, coordinator) is handed to another
process, which commits or aborts it with `TxnCoordinatorClient.end` (`Admin.end_transaction`).
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import quote

from kraft.api.client.group import GroupCoordinatorClient
from kraft.api.client.transport import Address, Transport
from kraft.api.client.types import TopicPartition
from kraft.api.errors import KraftError

# Kafka's fatal transactional errors: the producer cannot go on (ProducerFencedException,
# TransactionalIdAuthorizationException, ...); every other failure only aborts the transaction
FATAL_ERRORS = frozenset({
    "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED", "INVALID_PRODUCER_ID_MAPPING", "TRANSACTION_COORDINATOR_FENCED",
    "UNSUPPORTED_VERSION", "INVALID_TRANSACTION_TIMEOUT",
})


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    PREPARED = "PREPARED"  # written and handed off: only another init_transactions moves on
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class TransactionAbortableError(KraftError):
    """The transaction cannot commit; `abort_transaction()` and go on."""


class TransactionFatalError(KraftError):
    """The producer cannot go on (fenced by a newer one with the same transactional id, not
    authorized...): close it."""


def classify(error: KraftError) -> KraftError:
    """`error` as the abortable or fatal error it is in a transaction."""
    cls = TransactionFatalError if error.error_code in FATAL_ERRORS else TransactionAbortableError
    if isinstance(error, cls):
        return error
    classified = cls(error.error_code, error.message, **error.extra)
    classified.__cause__ = error
    return classified


@dataclass(frozen=True)
class PreparedTransaction:
    """A transaction written and left open, with what ends it from anywhere (KIP-939's
    PreparedTxnState plus the coordinator the producer found, a hint: asked again if it moved)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator: Address | None = None


class TxnCoordinatorClient(GroupCoordinatorClient):
    """Requests to the coordinator of a transactional id (found again when it moves)."""

    def _path(self, suffix: str) -> str:
        return f"/v1/transactions/{quote(self.group_id, safe='')}{suffix}"

    def end(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """EndTxn, its retriable answers retried within `timeout_s`. A retry of an EndTxn the
        coordinator already did succeeds; a producer epoch fenced meanwhile (a newer
        InitProducerId, the transaction timeout's abort) is PRODUCER_FENCED or INVALID_PRODUCER_EPOCH."""
        self.request("POST", "/end", {"producer_id": producer_id, "producer_epoch": producer_epoch,
                                      "commit": commit})


class TransactionManager:
    def __init__(self, transport: Transport, transactional_id: str, transaction_timeout_ms: int,
                 timeout_s: float, backoff_s: float) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.transport = transport
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.coordinator = TxnCoordinatorClient(transport, transactional_id, timeout_s, backoff_s)
        self.state = TransactionState.UNINITIALIZED
        self.last_error: KraftError | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self._added: set[TopicPartition] = set()
        self._offsets_added = False  # AddOffsetsToTxn put a group's partition in the transaction
        self._lock = threading.Lock()

    # -- state --------------------------------------------------------------------------------

    def _require(self, *states: TransactionState, doing: str) -> None:
        if self.state is TransactionState.FATAL_ERROR:
            raise TransactionFatalError(self.last_error.error_code if self.last_error else "INVALID_TXN_STATE",
                                        f"cannot {doing}: the producer hit a fatal error: {self.last_error}")
        if self.state not in states:
            raise KraftError("INVALID_TXN_STATE", f"cannot {doing} in state {self.state.value}")

    def fail(self, error: KraftError) -> KraftError:
        """Records `error` (from a send or a request) and returns it classified."""
        classified = classify(error)
        with self._lock:
            if self.state is not TransactionState.FATAL_ERROR:
                self.last_error = classified
                self.state = (TransactionState.FATAL_ERROR if isinstance(classified, TransactionFatalError)
                              else TransactionState.ABORTABLE_ERROR if self.state is TransactionState.IN_TRANSACTION
                              else self.state)
        return classified

    def _call(self, method: str, suffix: str, body: Any) -> Any:
        try:
            return self.coordinator.request(method, suffix, body)
        except KraftError as e:
            raise self.fail(e) from None

    # -- the API's steps ----------------------------------------------------------------------

    def init(self) -> tuple[int, int]:
        """InitProducerId: the producer id and epoch (fencing any older producer of the id)."""
        self._require(TransactionState.UNINITIALIZED, TransactionState.READY, TransactionState.PREPARED,
                      doing="init_transactions")
        answer = self._call("POST", "/init", {"transaction_timeout_ms": self.transaction_timeout_ms})
        self.producer_id, self.producer_epoch = int(answer["producer_id"]), int(answer["producer_epoch"])
        self.state = TransactionState.READY
        return self.producer_id, self.producer_epoch

    def begin(self) -> None:
        self._require(TransactionState.READY, doing="begin_transaction")
        self._added.clear()
        self._offsets_added = False
        self.state = TransactionState.IN_TRANSACTION

    def check_sendable(self) -> None:
        """`send` works only inside a transaction that did not fail."""
        if self.state is TransactionState.ABORTABLE_ERROR:
            raise TransactionAbortableError(self.last_error.error_code if self.last_error else "INVALID_TXN_STATE",
                                            f"the transaction must be aborted: {self.last_error}")
        self._require(TransactionState.IN_TRANSACTION, doing="send outside a transaction (begin_transaction first)")

    def unadded(self, tps: Iterable[TopicPartition]) -> set[TopicPartition]:
        return set(tps) - self._added

    def add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for partitions not in the transaction yet (the sender calls this
        before their first batch leaves)."""
        wanted = sorted(self.unadded(tps))
        if not wanted or self.state is not TransactionState.IN_TRANSACTION:
            return
        answer = self._call("POST", "/partitions", self._producer_body(
            partitions=[{"topic": tp.topic, "partition": tp.partition} for tp in wanted]))
        errors = [p for p in answer["partitions"] if p.get("error_code")]
        if errors:
            worst = next((p for p in errors if p["error_code"] != "OPERATION_NOT_ATTEMPTED"), errors[0])
            error = KraftError(str(worst["error_code"]), f"{worst['topic']}-{worst['partition']}: "
                               f"{worst.get('message') or 'could not be added to the transaction'}")
            if error.retriable:
                raise error  # the sender tries again next round
            raise self.fail(error)
        self._added.update(wanted)

    def send_offsets(self, offsets: dict[TopicPartition, int], group_id: str) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator."""
        self._require(TransactionState.IN_TRANSACTION, doing="send_offsets_to_transaction")
        group = GroupCoordinatorClient(self.transport, group_id, self.timeout_s, self.backoff_s)
        try:
            group.find_coordinator()  # creates __consumer_offsets on first use, as Kafka's does
        except KraftError as e:
            raise self.fail(e) from None
        self._call("POST", "/offsets", self._producer_body(group_id=group_id))
        self._offsets_added = True
        entries = [{"topic": tp.topic, "partition": tp.partition, "offset": int(getattr(o, "offset", o))}
                   for tp, o in sorted(offsets.items())]
        try:
            answer = group.request("POST", "/txn-offsets", self._producer_body(
                transactional_id=self.transactional_id, offsets=entries))
        except KraftError as e:
            raise self.fail(e) from None
        # the broker answers each offset; one it did not add leaves the transaction to abort
        refused = [o for o in (answer or {}).get("offsets", ()) if o.get("error_code")]
        if refused:
            raise self.fail(KraftError(refused[0]["error_code"], "offsets not added to the transaction: " + ", ".join(
                f"{o['topic']}-{o['partition']} ({o['error_code']})" for o in refused)))

    def end(self, commit: bool) -> None:
        """EndTxn (answered once the coordinator logged PrepareCommit/PrepareAbort)."""
        if commit:
            self._require(TransactionState.IN_TRANSACTION, doing="commit_transaction")
        else:
            self._require(TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR,
                          doing="abort_transaction")
        if self._added or self._offsets_added:  # nothing added: nothing to end (Kafka's client skips it)
            try:
                self.coordinator.end(self.producer_id, self.producer_epoch, commit)
            except KraftError as e:
                raise self.fail(e) from None
        self._handed_off()

    def prepare(self) -> PreparedTransaction | None:
        """Leaves the open transaction to whoever ends it (KIP-939's prepareTransaction): the
        producer may begin no other; None when nothing was added (nothing to end)."""
        self._require(TransactionState.IN_TRANSACTION, doing="prepare_transaction")
        prepared = None
        if self._added or self._offsets_added:
            prepared = PreparedTransaction(self.transactional_id, self.producer_id, self.producer_epoch,
                                           self.coordinator.coordinator)
        self._handed_off()
        if prepared is not None:
            self.state = TransactionState.PREPARED
        return prepared

    def _handed_off(self) -> None:
        self._added.clear()
        self._offsets_added = False
        self.state = TransactionState.READY
        self.last_error = None

    def _producer_body(self, **fields: Any) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch, **fields}

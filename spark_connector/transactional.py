"""The transactional sink (`kraft.transactional.id.prefix`, streaming only): a micro-batch's rows
become visible to read_committed readers when the driver commits the micro-batch, and a replayed
micro-batch is not written twice.

Two phases, as Kafka's two-phase participants (KIP-939) and Flink's Kafka sink:
- each write task of Spark partition `w` in query `q` (`sql.streaming.queryId`, stable across
  restarts of one checkpoint) is the transactional producer `f"{prefix}{q}-{w}"`. Its
  `init_transactions()` bumps the id's epoch: an older attempt of the same task (a failed or
  speculative attempt, the task of a query run that died) is fenced, and its open transaction is
  aborted. It writes its rows and, as the transaction's last write, a transactional offset commit
  to the group of the same name: `batch id + 1` (the dedupe marker: it becomes visible with the
  rows, atomically, or not at all). It does not end the transaction: it returns what ends it
  (`PreparedTransaction`: id, producer id and epoch, coordinator) in its commit message;
- the driver's `commit(messages, batchId)` ends them all with EndTxn(commit) (`end_transactions`),
  `abort` with EndTxn(abort). It ends only the epochs the successful attempts returned: a fenced
  one answers PRODUCER_FENCED, which fails the micro-batch.

Before writing, a task reads its group's committed offset: a micro-batch this task already
committed (a replay after a driver that died between EndTxns, or before Spark's commit log) is
skipped, so every row lands once. The window: between the driver's first and last EndTxn a reader
sees the committed tasks' rows before the others' (docs/spark.md). Rows are placed by the Python
client's partitioner.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa

from kraft.api.client import Admin, PreparedTransaction, Producer, TopicPartition
from kraft.api.errors import KraftError
from kraft.spark_connector.options import SinkOptions

log = logging.getLogger(__name__)

# the epoch was fenced before the driver's EndTxn: a newer attempt's init, or the timeout's abort
FENCED = frozenset({"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})
# the test harness's hook (tests/spark/conftest.py sets it before Spark starts, so the driver's
# Python workers inherit it): not a sink option, so no query's configuration can turn it on
COMMIT_GATES_ENV = "KRAFT_SPARK_TEST_COMMIT_GATES"
_GATE_POLL_S = 0.05


def _bytes(value: Any) -> bytes | None:
    return value.encode("utf-8") if isinstance(value, str) else value


def _admin(options: SinkOptions) -> Admin:
    return Admin(list(options.bootstrap_servers), api_timeout_ms=options.request_timeout_ms,
                 **options.security.client_configs())


class TransactionalTask:
    """One attempt of one write task in one micro-batch."""

    def __init__(self, options: SinkOptions, query_id: str, writer_id: int, batch_id: int) -> None:
        self.options = options
        self.transactional_id = f"{options.transactional_id_prefix}{query_id}-{writer_id}"
        self.batch_id = batch_id
        self.written = 0
        self.topics: set[str] = set()
        self.producer = Producer(list(options.bootstrap_servers), transactional_id=self.transactional_id,
                                 transaction_timeout_ms=options.transaction_timeout_ms,
                                 compression_type=options.compression, linger_ms=0,
                                 request_timeout_ms=options.request_timeout_ms,
                                 max_block_ms=options.request_timeout_ms, **options.security.client_configs())
        self.admin = _admin(options)

    def committed_batch(self) -> int:
        """The last micro-batch this task committed (-1: none)."""
        try:
            offsets = self.admin.list_group_offsets(self.transactional_id)
        except KraftError as e:
            if e.error_code != "GROUP_ID_NOT_FOUND":
                raise
            return -1
        return max(offsets.values(), default=0) - 1

    def begin(self) -> bool:
        """Fences older attempts; False when this micro-batch is already committed."""
        self.producer.init_transactions()  # an older attempt's transaction is ended first
        if self.committed_batch() >= self.batch_id:
            return False
        self.producer.begin_transaction()
        return True

    def add(self, batch: pa.RecordBatch) -> None:
        names = {n.lower(): n for n in batch.schema.names}
        for row in batch.to_pylist():
            topic = self.options.topic or row.get(names.get("topic", ""))
            if topic is None:
                raise KraftError("INVALID_REQUEST", "a row has a null topic and no topic option is set")
            headers = row.get(names.get("headers", "")) or ()
            self.producer.send(topic, _bytes(row[names["value"]]), key=_bytes(row.get(names.get("key", ""))),
                               partition=row.get(names.get("partition", "")),
                               headers=[(h["key"], _bytes(h["value"])) for h in headers])
            self.topics.add(topic)
            self.written += 1

    def prepare(self) -> PreparedTransaction | None:
        """Writes the rows and this micro-batch's marker, and leaves the transaction open for the
        driver; what ends it (None: no rows, nothing to end)."""
        if self.topics:
            marker = {TopicPartition(min(self.topics), 0): self.batch_id + 1}
            self.producer.send_offsets_to_transaction(marker, self.transactional_id)
        return self.producer.prepare_transaction()

    def abort(self) -> None:
        """Best effort: the next attempt's `begin` aborts it anyway."""
        try:
            self.producer.abort_transaction()
        except KraftError as e:
            log.info("%s: abort after a failed write: %s", self.transactional_id, e)

    def close(self) -> None:
        self.producer.close()
        self.admin.close()


def write_transactional(options: SinkOptions, iterator: Iterator[pa.RecordBatch], query_id: str,
                        writer_id: int, batch_id: int) -> tuple[int, PreparedTransaction | None]:
    """The task's rows in one open transaction: how many were written (0 when a replay skipped
    them) and what the driver ends it with."""
    task = TransactionalTask(options, query_id, writer_id, batch_id)
    try:
        if not task.begin():
            log.info("%s: micro-batch %d is already committed: skipped", task.transactional_id, batch_id)
            return 0, None
        try:
            for batch in iterator:
                task.add(batch)
            return task.written, task.prepare()
        except BaseException:
            task.abort()
            raise
    finally:
        task.close()


def end_transactions(options: SinkOptions, prepared: Sequence[PreparedTransaction], batch_id: int,
                     commit: bool) -> None:
    """The driver's side: EndTxn for every task's transaction of micro-batch `batch_id`, one after
    the other. A commit that fails raises with Kafka's error name (the micro-batch fails; its
    replay skips the tasks already committed); an abort is best effort (the next attempt of each
    task aborts what is left)."""
    admin = _admin(options)
    try:
        for index, txn in enumerate(prepared):
            _wait_at_gate(options.transactional_id_prefix, batch_id, index, options.transaction_timeout_ms)
            try:
                admin.end_transaction(txn, commit)
            except KraftError as e:
                if not commit:
                    log.info("%s: abort of micro-batch %d: %s", txn.transactional_id, batch_id, e)
                    continue
                hint = (" (a newer attempt of the task fenced it, or kraft.transaction.timeout.ms passed "
                        "before the driver's commit)" if e.error_code in FENCED else "")
                raise KraftError(e.error_code, f"micro-batch {batch_id}: cannot commit the transaction of "
                                 f"{txn.transactional_id!r} (epoch {txn.producer_epoch}){hint}: {e.message}; "
                                 f"{index} of {len(prepared)} tasks are committed, a restart replays the "
                                 "others") from e
    finally:
        admin.close()
    log.info("micro-batch %d: %s %d transactions", batch_id, "committed" if commit else "aborted", len(prepared))


def _wait_at_gate(prefix: str | None, batch_id: int, index: int, timeout_ms: int) -> None:
    """Test hook: with the environment variable COMMIT_GATES_ENV naming a directory that holds a
    directory named after the sink's transactional id prefix, before EndTxn `index` of a
    micro-batch the driver writes its pid to `reached-{batch_id}-{index}` there and waits while
    the file `allow` holds a number <= index (at most `timeout_ms`: by then the broker aborted
    the transactions)."""
    root = os.environ.get(COMMIT_GATES_ENV)
    if root is None or prefix is None or not Path(root, prefix).is_dir():
        return
    gate = Path(root, prefix)
    Path(gate, f"reached-{batch_id}-{index}").write_text(str(os.getpid()))
    allow = Path(gate, "allow")
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        try:
            if int(allow.read_text() or "0") > index:
                return
        except FileNotFoundError:
            return
        time.sleep(_GATE_POLL_S)

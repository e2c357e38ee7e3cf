"""The transactional sink (`kraft.transactional.id.prefix`, streaming only): each write task of a
micro-batch writes its rows in one Kafka transaction, and a replayed micro-batch is not written
twice.

The task of Spark partition `w` in query `q` (`sql.streaming.queryId`, stable across restarts of one
checkpoint) is the transactional producer `f"{prefix}{q}-{w}"` (docs/transactions.md):
- `init_transactions()` bumps the id's epoch: an older attempt of the same task (a failed or
  speculative attempt, the task of a query run that died) is fenced, and its open transaction is
  aborted before this one starts;
- the transaction holds the task's rows and, as its last write, a transactional offset commit to
  the group of the same name: `batch id + 1` (the Flink/Kafka Streams way of making the commit
  idempotent: the marker becomes visible with the rows, atomically, or not at all);
- before writing, the task reads that group's committed offset: a micro-batch this task already
  committed (a replay after a driver failure between the tasks' commits and Spark's commit log)
  writes nothing.

Readers with `isolation_level=read_committed` see each task's rows of a micro-batch all at once or
not at all, and every row once, provided the replay hands the same rows to the same task (as
`exactlyOnce=true` needs too: docs/spark.md). Rows are placed by the Python client's partitioner.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import pyarrow as pa

from kraft.api.client import Admin, Producer, TopicPartition
from kraft.api.errors import KraftError
from kraft.spark_connector.options import SinkOptions

log = logging.getLogger(__name__)


def _bytes(value: Any) -> bytes | None:
    return value.encode("utf-8") if isinstance(value, str) else value


class TransactionalTask:
    """One attempt of one write task in one micro-batch."""

    def __init__(self, options: SinkOptions, query_id: str, writer_id: int, batch_id: int) -> None:
        self.options = options
        self.transactional_id = f"{options.transactional_id_prefix}{query_id}-{writer_id}"
        self.batch_id = batch_id
        self.written = 0
        self.topics: set[str] = set()
        servers = list(options.bootstrap_servers)
        security = options.security.client_configs()
        self.producer = Producer(servers, transactional_id=self.transactional_id,
                                 transaction_timeout_ms=options.transaction_timeout_ms,
                                 compression_type=options.compression, linger_ms=0,
                                 request_timeout_ms=options.request_timeout_ms,
                                 max_block_ms=options.request_timeout_ms, **security)
        self.admin = Admin(servers, api_timeout_ms=options.request_timeout_ms, **security)

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

    def commit(self) -> int:
        """Commits the rows with this micro-batch's marker; how many rows."""
        if self.topics:
            marker = {TopicPartition(min(self.topics), 0): self.batch_id + 1}
            self.producer.send_offsets_to_transaction(marker, self.transactional_id)
        self.producer.commit_transaction()
        return self.written

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
                        writer_id: int, batch_id: int) -> int:
    """The task's rows in one transaction; how many were written (0 when a replay skipped them)."""
    task = TransactionalTask(options, query_id, writer_id, batch_id)
    try:
        if not task.begin():
            log.info("%s: micro-batch %d is already committed: skipped", task.transactional_id, batch_id)
            return 0
        try:
            for batch in iterator:
                task.add(batch)
            return task.commit()
        except BaseException:
            task.abort()
            raise
    finally:
        task.close()

"""The sink: batch and streaming writers that produce DataFrame rows to kraft topics.

Columns as in Spark's Kafka sink: `value` (required), `key`, `topic` (or the `topic` option, which
wins), `partition`, `headers`; other columns are ignored. Keyed records go where Kafka's murmur2
partitioner puts them (`api.partitioner`), keyless ones stick to one partition per batch, explicit
`partition` values are honoured. Rows arrive as Arrow batches; each task builds record batches per
topic-partition and sends them with the msgpack batch produce route to the partition leaders.

Delivery is at-least-once (a retried task or micro-batch writes again), like Spark's Kafka sink.
With `exactlyOnce=true` (streaming only) each task writes as an idempotent producer
(docs/idempotence.md): the writer of Spark partition `w` in query `q` has the producer id derived
from the transactional id `f"{q}-{w}"`, micro-batch `b` is written with producer epoch
`b % 32767` (a new derived id, of `f"{q}-{w}-{b // 32767}"`, every 32767 micro-batches), and the
task sends all its records of one topic-partition as one produce entry with sequences from 0. A
replayed micro-batch sends the same sequences in the same epoch, which the broker answers as
duplicates without writing them again; a late task of an older micro-batch is fenced
(INVALID_PRODUCER_EPOCH). With `kraft.transactional.id.prefix` each task writes in a
transaction instead, which the driver's `commit` ends (`transactional.py`).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from itertools import repeat
from operator import add
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from kraft.api.client import PreparedTransaction
from kraft.api.errors import KraftError
from kraft.api.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive
from kraft.producer_ids import MAX_PRODUCER_EPOCH, derived_producer_id
from kraft.spark_connector.batches import RECORD_OVERHEAD, PartitionBatches, row_ends
from kraft.spark_connector.broker import BrokerClient
from kraft.spark_connector.offsets import TopicPartition
from kraft.spark_connector.options import SinkOptions
from kraft.spark_connector.schema import HEADERS_TYPE
from kraft.spark_connector.transactional import end_transactions, write_transactional

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY
IDEMPOTENCE_FEATURE = "idempotence"  # what a broker lists in GET /v1/health "features"
_FLUSH_FACTOR = 4  # a task sends once it buffers this many kraft.batch.size worth of records


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Rejects DataFrames the sink cannot write, naming the column and the accepted types."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    allowed = {
        "value": (BinaryType(), StringType()),
        "key": (BinaryType(), StringType()),
        "topic": (StringType(),),
        "partition": (IntegerType(),),
        "headers": (HEADERS_TYPE,),
    }
    if "value" not in types:
        raise KraftError("INVALID_REQUEST", f"the sink needs a value column; the DataFrame has {schema.fieldNames()}")
    if options.topic is None and "topic" not in types:
        raise KraftError("INVALID_REQUEST", "no topic: set the topic option or add a topic column")
    for name, accepted in allowed.items():
        if name in types and not any(types[name] == t for t in accepted):
            raise KraftError(
                "INVALID_REQUEST",
                f"column {name} has type {types[name].simpleString()}; the sink accepts "
                + " or ".join(t.simpleString() for t in accepted),
            )


@dataclass
class WriteSummary(WriterCommitMessage):
    records: int  # sent and acknowledged (a replay's duplicates included: the broker skips them)
    prepared: PreparedTransaction | None = None  # the transactional sink's: the driver ends it


@dataclass(frozen=True)
class SinkProducer:
    """The idempotent producer one exactly-once write task is: the same for every attempt of
    the task in the same micro-batch, a higher epoch in each later micro-batch."""

    producer_id: int
    producer_epoch: int

    @classmethod
    def for_task(cls, query_id: str, writer_id: int, batch_id: int) -> SinkProducer:
        generation, epoch = divmod(batch_id, MAX_PRODUCER_EPOCH)
        transactional_id = f"{query_id}-{writer_id}" + (f"-{generation}" if generation else "")
        return cls(derived_producer_id(transactional_id), epoch)


class _Producer:
    """Buffers rows per topic-partition and sends them to the leaders (one task's worth)."""

    def __init__(self, options: SinkOptions, idempotent: SinkProducer | None, seed: int) -> None:
        self.options = options
        self.idempotent = idempotent
        self.client = BrokerClient(options.bootstrap_servers, options.request_timeout_ms, options.security)
        self.sticky = StickyPartitioner(random.Random(seed).randrange)
        self.pending: dict[TopicPartition, PartitionBatches] = {}
        self.pending_bytes = 0
        self.summary = WriteSummary(0)
        self.counts: dict[str, int] = {}  # partition counts, fixed for the task so routing is stable

    def partition_count(self, topic: str) -> int:
        count = self.counts.get(topic)
        if count is None:
            parts = self.client.metadata(refresh=True).partitions(topic)
            if not parts:
                raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist")
            count = self.counts[topic] = len(parts)
        return count

    def add_batch(self, batch: pa.RecordBatch) -> None:
        names = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        n = batch.num_rows
        value_column = _binary_column(batch, names["value"])
        headers = None
        if "headers" in names:
            headers = [tuple((h["key"], h["value"]) for h in hs) if hs else ()
                       for hs in batch.column(names["headers"]).to_pylist()]
        now_ms = int(time.time() * 1000)
        topic = self.options.topic
        if topic is not None and "partition" not in names and "key" not in names and self.idempotent is None:
            # The common bulk case: one topic, keyless, so the whole Arrow batch sticks together.
            tp = (topic, self.route(topic, None, None, None))
            self._batches(tp).add(value_column, _row_ends(value_column), now_ms, None, headers)
        else:
            values = value_column.to_pylist()
            keys = _binary_column(batch, names["key"]).to_pylist() if "key" in names else None
            topics = repeat(topic, n) if topic else batch.column(names["topic"]).to_pylist()
            fixed = batch.column(names["partition"]).to_pylist() if "partition" in names else repeat(None, n)
            groups: dict[TopicPartition, list[int]] = {}
            for i, (t, partition, key, value) in enumerate(zip(topics, fixed, keys or repeat(None, n), values)):
                if t is None:
                    raise KraftError("INVALID_REQUEST", "a row has a null topic and no topic option is set")
                groups.setdefault((t, self.route(t, partition, key, value)), []).append(i)
            for tp, rows in groups.items():
                group_keys = None if keys is None else [keys[i] for i in rows]
                group_values = [values[i] for i in rows]
                sizes = map(add, map(len, map(_or_empty, group_values)),
                            repeat(0) if group_keys is None else map(len, map(_or_empty, group_keys)))
                self._batches(tp).add(group_values, row_ends(sizes), now_ms, group_keys,
                                      None if headers is None else [headers[i] for i in rows])
        self.pending_bytes += _payload_bytes(batch, names)
        if self.idempotent is None and self.pending_bytes >= _FLUSH_FACTOR * self.options.batch_size:
            self.flush()

    def _batches(self, tp: TopicPartition) -> PartitionBatches:
        batches = self.pending.get(tp)
        if batches is None:
            pid, epoch = (-1, -1) if self.idempotent is None else (
                self.idempotent.producer_id, self.idempotent.producer_epoch)
            batches = self.pending[tp] = PartitionBatches(self.options.batch_size, self.options.compression, pid, epoch)
        return batches

    def route(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None) -> int:
        count = self.partition_count(topic)
        if partition is not None:
            if not 0 <= partition < count:
                raise KraftError("UNKNOWN_TOPIC_OR_PARTITION",
                                 f"partition {partition} of {topic!r} does not exist ({count} partitions)")
            return partition
        if key is not None:
            return partition_for_key(key, count)
        if self.idempotent is not None:
            # A replayed task may see its rows in another order; a content-based choice puts
            # every keyless record in the same partition again, so the broker can dedupe it.
            return to_positive(murmur2(value or b"")) % count
        return self.sticky.partition(topic, count)

    def flush(self) -> None:
        """Sends the buffered rows. Exactly-once tasks flush once, at the end, so that each
        topic-partition gets one entry with sequences 0.. (atomic on the broker)."""
        entries = []
        for tp, batches in self.pending.items():
            records, count = batches.take()
            if not count:
                continue
            entries.append(({"topic": tp[0], "partition": tp[1], "records": records}, count))
            if self.idempotent is None:
                self.sticky.on_new_batch(tp[0], self.partition_count(tp[0]), tp[1])
        self.pending.clear()
        self.pending_bytes = 0
        if entries:
            self.send(entries)

    def send(self, entries: list[tuple[dict[str, Any], int]]) -> None:
        deadline = time.monotonic() + self.options.request_timeout_ms / 1000
        acks = -1 if self.options.acks == "all" else int(self.options.acks)
        todo = entries
        while todo:
            by_leader: dict[str, list[tuple[dict[str, Any], int]]] = {}
            for item in todo:
                leader = self.client.retrying(lambda: self.client.leader((item[0]["topic"], item[0]["partition"])),
                                              deadline)
                by_leader.setdefault(leader, []).append(item)
            retry: list[tuple[dict[str, Any], int]] = []
            last_error: KraftError | None = None
            for leader, items in by_leader.items():
                try:
                    answers = self.client.produce(leader, [e for e, _ in items], acks, self.options.request_timeout_ms)
                except KraftError as e:
                    if not e.retriable:
                        raise
                    retry.extend(items)
                    last_error = e
                    continue
                for (entry, count), answer in zip(items, answers):
                    error = answer.get("error_code")
                    if error:
                        e = KraftError(error, f"{entry['topic']}-{entry['partition']}: {answer.get('message', '')}")
                        if not e.retriable:
                            raise e
                        retry.append((entry, count))
                        last_error = e
                        continue
                    self.summary.records += count
            if retry:
                if time.monotonic() >= deadline:
                    raise last_error or KraftError("REQUEST_TIMED_OUT", "produce did not complete in time")
                time.sleep(0.1)
                self.client.metadata(refresh=True)
            todo = retry

    def close(self) -> None:
        self.client.close()


def _payload_bytes(batch: pa.RecordBatch, names: dict[str, int]) -> int:
    return sum(batch.column(names[c]).nbytes for c in ("key", "value") if c in names) + RECORD_OVERHEAD * batch.num_rows


def _binary_column(batch: pa.RecordBatch, index: int) -> pa.Array:
    column = batch.column(index)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column


def _row_ends(values: pa.Array) -> Sequence[int]:
    """`row_ends` of keyless rows, computed by Arrow. A list, not `to_numpy()`: the spark extra
    does not bring numpy, and pyarrow works without it."""
    sizes = pc.add(pc.fill_null(pc.binary_length(values), 0).cast(pa.int64()), RECORD_OVERHEAD)
    return pc.cumulative_sum(sizes).to_pylist()


def _or_empty(data: bytes | None) -> bytes:
    return data or b""


def _write(options: SinkOptions, iterator: Iterator[pa.RecordBatch],
           idempotent: SinkProducer | None) -> WriteSummary:
    context = TaskContext.get()
    producer = _Producer(options, idempotent, seed=context.partitionId() if context else 0)
    try:
        for batch in iterator:
            producer.add_batch(batch)
        producer.flush()
        return producer.summary
    finally:
        producer.close()


def _streaming_task() -> tuple[str, int, int]:
    """The task's (query id, Spark partition id, micro-batch id), which the exactly-once modes key on."""
    context = TaskContext.get()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
    if context is None or query_id is None or batch_id is None:
        raise KraftError("INVALID_REQUEST", "an exactly-once sink needs a streaming query: this task has no "
                                            f"{QUERY_ID_PROPERTY}/{BATCH_ID_PROPERTY} local properties")
    return query_id, context.partitionId(), int(batch_id)


def check_exactly_once_support(options: SinkOptions) -> None:
    """Fails fast, on the driver, when the broker has no idempotent produce."""
    client = BrokerClient(options.bootstrap_servers, options.request_timeout_ms, options.security)
    try:
        features = client.health().get("features") or []
    finally:
        client.close()
    if IDEMPOTENCE_FEATURE not in features:
        raise KraftError(
            "UNSUPPORTED_VERSION",
            f"exactlyOnce=true needs brokers with the {IDEMPOTENCE_FEATURE!r} feature (GET /v1/health "
            f"lists {features}); see docs/spark.md, 'Exactly-once sink'. Use exactlyOnce=false for "
            "at-least-once delivery.",
        )


class KraftBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteSummary:  # type: ignore[override]
        return _write(self.options, iterator, None)


class KraftStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteSummary:  # type: ignore[override]
        if self.options.transactional_id_prefix is not None:
            return WriteSummary(*write_transactional(self.options, iterator, *_streaming_task()))
        return _write(self.options, iterator,
                      SinkProducer.for_task(*_streaming_task()) if self.options.exactly_once else None)

    def commit(self, messages: list[WriteSummary | None], batchId: int) -> None:  # type: ignore[override]
        """Runs on the driver once every task succeeded: the transactional sink's transactions
        are committed here, so a micro-batch becomes visible as a whole."""
        self._end(messages, batchId, commit=True)
        written = sum(m.records for m in messages if m)
        log.info("micro-batch %d: %d records acknowledged", batchId, written)

    def abort(self, messages: list[WriteSummary | None], batchId: int) -> None:  # type: ignore[override]
        """A task failed for good: the transactions of those that succeeded are aborted."""
        self._end(messages, batchId, commit=False)

    def _end(self, messages: list[WriteSummary | None], batch_id: int, commit: bool) -> None:
        prepared = [m.prepared for m in messages if m is not None and m.prepared is not None]
        if self.options.transactional_id_prefix is not None and prepared:
            end_transactions(self.options, prepared, batch_id, commit)

"""The source: batch reader and micro-batch stream reader, and the task that reads one offset range.

Planning (driver) resolves offsets and cuts them into `RangePartition`s, one per topic-partition
range. Each Spark task pages through the batch fetch route from the partition leader and yields
Arrow record batches. Readers are pickled to the workers: they hold options only, and open their
HTTP session inside `read()`.

Data loss (records the query still needs were deleted by retention, or a partition vanished) fails
the query when `failOnDataLoss=true` and is skipped with a warning otherwise, as in Spark's Kafka
source. `kraft.isolation.level=read_committed` (Spark's `kafka.isolation.level`) plans up to the
last stable offsets and leaves aborted transactions' records out; markers are never rows.
"""

from __future__ import annotations

import gc
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from kraft.api.errors import KraftError
from kraft.log.isolation import readable_batches
from kraft.spark_connector import positions
from kraft.spark_connector.broker import BrokerClient
from kraft.spark_connector.offsets import OffsetRange, PartitionOffsets, from_json, plan_ranges, rate_limit, to_json
from kraft.spark_connector.options import SourceOptions
from kraft.spark_connector.schema import ColumnBuilder, arrow_schema

log = logging.getLogger(__name__)
_FETCH_WAIT_MS = 500


@dataclass
class RangePartition(InputPartition):
    range: OffsetRange


def source_client(options: SourceOptions) -> BrokerClient:
    return BrokerClient(options.bootstrap_servers, options.request_timeout_ms, options.security,
                        options.isolation_level)


def report_data_loss(options: SourceOptions, message: str) -> None:
    if options.fail_on_data_loss:
        raise KraftError(
            "OFFSET_OUT_OF_RANGE",
            f"{message}. Some data may have been lost (deleted by retention, or the partition was "
            "deleted or truncated). Set failOnDataLoss=false to skip it and go on.",
        )
    log.warning("%s; skipping it (failOnDataLoss=false)", message)


def read_range(r: OffsetRange, options: SourceOptions, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yields the records [from_offset, until_offset) of one partition as Arrow batches."""
    client = source_client(options)
    tp = (r.topic, r.partition)
    offset = r.from_offset
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    try:
        while offset < r.until_offset:
            try:
                fetched = client.retrying(
                    lambda: client.fetch(tp, offset, options.max_partition_fetch_bytes, _FETCH_WAIT_MS), deadline
                )
            except KraftError as e:
                if e.error_code != "OFFSET_OUT_OF_RANGE":
                    raise
                listed = client.list_offsets(tp)
                report_data_loss(options, f"cannot read {r.topic}-{r.partition} at offset {offset}: the "
                                          f"log holds [{listed.log_start_offset}, {listed.end_offset})")
                offset = max(offset, min(listed.log_start_offset, r.until_offset))
                if listed.log_start_offset <= offset and listed.end_offset <= offset:
                    break  # truncated below what we planned: nothing left to read
                continue
            batch, next_offset = _decode_page(fetched.records, offset, r.until_offset, r.topic, r.partition, schema,
                                              fetched.aborted)
            if batch is not None:
                yield batch
            if next_offset > offset:
                offset = next_offset
                deadline = time.monotonic() + options.poll_timeout_ms / 1000
            elif time.monotonic() >= deadline:
                report_data_loss(options, f"{r.topic}-{r.partition} served no records at offset {offset} "
                                          f"(high watermark {fetched.high_watermark}) within "
                                          f"kraftConsumer.pollTimeoutMs, expected them up to {r.until_offset}")
                break
    finally:
        client.close()


def _decode_page(buf: bytes, offset: int, until: int, topic: str, partition: int,
                 schema: pa.Schema, aborted: list[tuple[int, int]] | None = None) -> tuple[pa.RecordBatch | None, int]:
    """The records of a fetch answer in [offset, until) and the offset to fetch next: markers, and
    for read_committed (`aborted`) the aborted transactions' batches, are read past, never rows."""
    columns = ColumnBuilder(topic, partition, schema)
    next_offset = offset
    with _gc_paused():
        for pos, header, visible in readable_batches(buf, aborted):
            if header.next_offset <= offset:
                continue
            if header.base_offset >= until:
                break
            if visible:
                columns.add_batch(buf, pos, offset, until)
            next_offset = min(until, header.next_offset)
        return (columns.build() if len(columns) else None), next_offset


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Holds off the cyclic collector: a page decodes to ~10^5 tuples and bytes, which hold no
    cycles, yet the collector's passes over them as they pile up cost several times the decoding."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class KraftBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[RangePartition]:
        client = source_client(self.options)
        try:
            tps = positions.subscribed_partitions(client, self.options.subscription)
            start = positions.resolve(client, self.options.starting, tps, "startingOffsets",
                                      self.options.timestamp_strategy)
            end = positions.resolve(client, self.options.ending, tps, "endingOffsets")
        finally:
            client.close()
        backwards = {tp: (start[tp], end[tp]) for tp in tps if end[tp] < start[tp]}
        if backwards:
            raise KraftError("INVALID_CONFIG", f"ending offsets before starting offsets: {backwards}")
        return [RangePartition(r) for r in plan_ranges(start, end, self.options.min_partitions)]

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return read_range(partition.range, self.options, arrow_schema(self.schema))


class KraftStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are `{"topic": {"partition": next offset to read}}`, canonical JSON."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._client: BrokerClient | None = None  # driver only; see __getstate__
        self._target: PartitionOffsets | None = None  # Trigger.AvailableNow's end, once prepared

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> BrokerClient:
        if self._client is None:
            self._client = source_client(self.options)
        return self._client

    def initialOffset(self) -> dict:
        tps = positions.subscribed_partitions(self.client, self.options.subscription)
        return to_json(positions.resolve(self.client, self.options.starting, tps, "startingOffsets",
                                         self.options.timestamp_strategy))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = positions.subscribed_partitions(self.client, self.options.subscription)
        self._target = positions.latest(self.client, tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = self._start_offsets(start)
        if self._target is not None:
            latest = {tp: min(hw, self._target[tp]) for tp, hw in positions.latest(self.client, list(begin)).items()}
        else:
            latest = positions.latest(self.client, list(begin))
        for tp, end in latest.items():
            if end < begin[tp]:
                report_data_loss(self.options, f"{tp[0]}-{tp[1]}'s high watermark went back from "
                                               f"{begin[tp]} to {end}")
                latest[tp] = begin[tp]
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json(latest)

    def _start_offsets(self, start: dict) -> PartitionOffsets:
        """`start` restricted to the partitions that still exist, plus new partitions at their
        earliest offset (Kafka's rule); with AvailableNow only the target's partitions count."""
        current = positions.subscribed_partitions(self.client, self.options.subscription)
        if self._target is not None:
            current = [tp for tp in current if tp in self._target]
        begin = from_json(start, "start offset")
        gone = sorted(set(begin) - set(current))
        if gone:
            report_data_loss(self.options, "partition(s) " + ", ".join(f"{t}-{p}" for t, p in gone)
                             + " disappeared")
        new = [tp for tp in current if tp not in begin]
        out = {tp: begin[tp] for tp in current if tp in begin}
        out.update(positions.earliest(self.client, new))
        return out

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        begin = from_json(start, "start offset")
        until = from_json(end, "end offset")
        new = [tp for tp in until if tp not in begin]
        begin.update(positions.earliest(self.client, new))
        return [RangePartition(r) for r in plan_ranges(begin, until, self.options.min_partitions)]

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return read_range(partition.range, self.options, arrow_schema(self.schema))

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

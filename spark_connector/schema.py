"""The source schema (Spark's Kafka schema) and the conversion of fetched batches to Arrow.

Rows are built column-wise straight from the fetched batches, and handed to Spark as
`pyarrow.RecordBatch`es whose schema equals Spark's own Arrow rendering of the source schema
(Spark checks it): timestamps are UTC microseconds.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Sequence

import msgpack
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from log.batch import HEADER_SIZE, decode_records, validate_batch
from log.errors import CorruptRecordError

TIMESTAMP_TYPE_CREATE_TIME = 0
TIMESTAMP_TYPE_LOG_APPEND_TIME = 1

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]), True
)


def source_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE, True))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC")


class ColumnBuilder:
    """Accumulates the records of one topic-partition column-wise, batch by batch, then builds
    one Arrow batch. Uncompressed kraft batches are sliced straight from their msgpack payload;
    compressed ones go through `decode_records`."""

    def __init__(self, topic: str, partition: int, schema: pa.Schema) -> None:
        self.topic = topic
        self.partition = partition
        self.schema = schema
        self.with_headers = "headers" in schema.names
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[Any] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add_batch(self, buf: bytes, pos: int, lo: int, hi: int) -> None:
        """Adds the records with offsets in [lo, hi) of the batch at `pos`."""
        header = validate_batch(buf, pos)
        ts_type = TIMESTAMP_TYPE_LOG_APPEND_TIME if header.is_log_append_time else TIMESTAMP_TYPE_CREATE_TIME
        if header.compression_code != 0:
            records = [r for r in decode_records(buf, pos) if lo <= r.offset < hi]
            self._extend(
                [r.key for r in records], [r.value for r in records], [r.offset for r in records],
                [r.timestamp for r in records], ts_type, [r.headers for r in records],
            )
            return
        try:
            rows = msgpack.unpackb(memoryview(buf)[pos + HEADER_SIZE:pos + header.size_in_bytes], raw=False)
            deltas, ts_deltas, keys, values, headers = zip(*rows) if rows else ((),) * 5
        except (ValueError, TypeError, msgpack.UnpackException) as e:
            raise CorruptRecordError(f"batch at offset {header.base_offset}: bad payload ({e})") from e
        if len(deltas) != header.record_count:
            raise CorruptRecordError(f"batch at offset {header.base_offset} declares {header.record_count} "
                                     f"records but holds {len(deltas)}")
        base = header.base_offset
        first = bisect_left(deltas, lo - base)
        last = bisect_left(deltas, hi - base)
        if header.is_log_append_time:
            timestamps = [header.max_timestamp] * (last - first)
        else:
            timestamps = [header.base_timestamp + d for d in ts_deltas[first:last]]
        self._extend(keys[first:last], values[first:last], [base + d for d in deltas[first:last]],
                     timestamps, ts_type, headers[first:last])

    def _extend(self, keys: Sequence[Any], values: Sequence[Any], offsets: Sequence[int],
                timestamps: Sequence[int], ts_type: int, headers: Sequence[Any]) -> None:
        self.keys.extend(keys)
        self.values.extend(values)
        self.offsets.extend(offsets)
        self.timestamps.extend(timestamps)
        self.timestamp_types.extend([ts_type] * len(offsets))
        if self.with_headers:
            self.headers.extend([{"key": k, "value": v} for k, v in h] for h in headers)

    def build(self) -> pa.RecordBatch:
        n = len(self.offsets)
        try:
            columns = [
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                pa.array([self.topic] * n, pa.string()),
                pa.array([self.partition] * n, pa.int32()),
                pa.array(self.offsets, pa.int64()),
                pc.multiply(pa.array(self.timestamps, pa.int64()), 1000).cast(self.schema.field("timestamp").type),
                pa.array(self.timestamp_types, pa.int32()),
            ]
            if self.with_headers:
                columns.append(pa.array(self.headers, self.schema.field("headers").type))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise CorruptRecordError(f"{self.topic}-{self.partition}: malformed records ({e})") from e
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

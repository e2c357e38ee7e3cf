"""The source schema (Spark's Kafka schema) and the conversion of fetched batches to Arrow.

Rows are built column-wise straight from the fetched batches, and handed to Spark as
`pyarrow.RecordBatch`es whose schema equals Spark's own Arrow rendering of the source schema
(Spark checks it): timestamps are UTC microseconds.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import repeat
from typing import Any, Sequence

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

from kraft.log.records import decode_columns
from kraft.log.errors import CorruptRecordError

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


_counting = pa.array([], pa.int64())  # 0, 1, 2, ...: consecutive offsets are a slice of it plus the first


def _int64s(offsets: Sequence[int]) -> pa.Array:
    """`offsets` as an Arrow int64 array; a range by Arrow kernels, without a Python int a record."""
    global _counting
    if not isinstance(offsets, range) or offsets.step != 1:
        return pa.array(offsets, pa.int64())
    n = len(offsets)
    if len(_counting) < n:
        _counting = pa.array(range(max(n, 2 * len(_counting), 1024)), pa.int64())
    return pc.add(_counting.slice(0, n), pa.scalar(offsets.start, pa.int64()))


class ColumnBuilder:
    """Accumulates the records of one topic-partition column-wise, batch by batch (with
    `kraft.log.records.decode_columns`, compressed or not), then builds one Arrow batch from whole
    columns."""

    def __init__(self, topic: str, partition: int, schema: pa.Schema) -> None:
        self.topic = topic
        self.partition = partition
        self.schema = schema
        self.with_headers = "headers" in schema.names
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        # Offsets and timestamp types as Arrow pieces, one a batch: a batch's offsets are usually
        # consecutive, and its records share one timestamp type, so neither needs a Python int a record.
        self.offsets: list[pa.Array] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[pa.Array] = []
        self.headers: list[Any] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add_batch(self, buf: bytes, pos: int, lo: int, hi: int) -> None:
        """Adds the records with offsets in [lo, hi) of the batch at `pos`."""
        columns = decode_columns(buf, pos)
        first = bisect_left(columns.offsets, lo)
        last = bisect_left(columns.offsets, hi)
        count = last - first
        if not count:
            return
        self._count += count
        self.keys.extend(columns.keys[first:last])
        self.values.extend(columns.values[first:last])
        self.offsets.append(_int64s(columns.offsets[first:last]))
        self.timestamps.extend(columns.timestamps[first:last])
        ts_type = TIMESTAMP_TYPE_LOG_APPEND_TIME if columns.header.is_log_append_time else TIMESTAMP_TYPE_CREATE_TIME
        self.timestamp_types.append(pa.repeat(pa.scalar(ts_type, pa.int32()), count))
        if self.with_headers:
            headers = columns.headers[first:last]
            if headers.count(()) == count:
                self.headers.extend(repeat([], count))
            else:
                self.headers.extend([{"key": k, "value": v} for k, v in h] for h in headers)

    def build(self) -> pa.RecordBatch:
        n = self._count
        try:
            columns = [
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                pa.repeat(pa.scalar(self.topic, pa.string()), n),
                pa.repeat(pa.scalar(self.partition, pa.int32()), n),
                pa.concat_arrays(self.offsets) if self.offsets else pa.array([], pa.int64()),
                pc.multiply(pa.array(self.timestamps, pa.int64()), 1000).cast(self.schema.field("timestamp").type),
                pa.concat_arrays(self.timestamp_types) if self.timestamp_types else pa.array([], pa.int32()),
            ]
            if self.with_headers:
                columns.append(pa.array(self.headers, self.schema.field("headers").type))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise CorruptRecordError(f"{self.topic}-{self.partition}: malformed records ({e})") from e
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

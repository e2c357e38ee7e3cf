"""The source schema (Spark's Kafka schema) and the conversion of fetched batches to Arrow.

Rows are built column-wise straight from the decoded records, and handed to Spark as
`pyarrow.RecordBatch`es whose schema equals Spark's own Arrow rendering of the source schema
(Spark checks it): timestamps are UTC microseconds.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
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

from log.batch import Record

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


def records_to_arrow(
    records: Sequence[Record],
    topic: str,
    partition: int,
    timestamp_types: Sequence[int],
    schema: pa.Schema,
) -> pa.RecordBatch:
    """One Arrow batch from records of one topic-partition (timestamps in ms become UTC µs);
    `timestamp_types[i]` is record i's (0 CreateTime, 1 LogAppendTime)."""
    n = len(records)
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(schema.field("timestamp").type),
        pa.array(timestamp_types, pa.int32()),
    ]
    if len(schema) == len(columns) + 1:
        columns.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in r.headers] for r in records],
                schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)

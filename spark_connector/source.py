"""The `kraft` data source: Spark's entry point, handing out readers and writers.

Options are parsed here, on the driver, so a wrong option fails the query before any task runs.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from kraft.spark_connector.options import parse_sink_options, parse_source_options
from kraft.spark_connector.reader import KraftBatchReader, KraftStreamReader
from kraft.spark_connector.schema import source_schema
from kraft.spark_connector.writer import KraftBatchWriter, KraftStreamWriter, check_exactly_once_support, check_sink_schema

FORMAT = "kraft"


class KraftDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> KraftBatchReader:
        return KraftBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> KraftStreamReader:
        return KraftStreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> KraftBatchWriter:
        options = parse_sink_options(self.options, streaming=False)
        check_sink_schema(schema, options)
        return KraftBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KraftStreamWriter:
        options = parse_sink_options(self.options, streaming=True)
        check_sink_schema(schema, options)
        if options.exactly_once:
            check_exactly_once_support(options)
        return KraftStreamWriter(options)

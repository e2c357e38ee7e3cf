"""kraft as a Spark source and sink (PySpark's Python Data Source API; design §12, docs/spark.md).

    from kraft import spark_connector
    spark_connector.register(spark)
    spark.readStream.format("kraft").option("kraft.bootstrap.servers", "127.0.0.1:9092") ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.spark_connector.source import FORMAT, KraftDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT", "KraftDataSource", "DefaultSource", "register"]

DefaultSource = KraftDataSource  # the name Spark's `pyspark_<name>` module discovery looks for


def register(spark: "SparkSession") -> None:
    """Makes `format("kraft")` available to `spark` (read, readStream, write, writeStream)."""
    spark.dataSource.register(KraftDataSource)

"""Spark's automatic discovery hook: PySpark imports every top-level `pyspark_*` module and registers
its `DefaultSource`, so `format("kraft")` works without `spark_connector.register(spark)`."""

from kraft.spark_connector import DefaultSource

__all__ = ["DefaultSource"]

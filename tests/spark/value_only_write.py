"""Spark's most common Kafka-sink shape, run as its own program (`python value_only_write.py
BOOTSTRAP TOPIC`): a value-only DataFrame, then a keyed one, written to TOPIC with the kraft sink,
then read back with the kraft source (printed as `read: [(key, value), ...]`).
Used where the test process's own environment must not leak in: a clean virtualenv, or numpy
blocked. Prints the numpy import outcome, so the caller sees what environment it ran in."""

from __future__ import annotations

import os
import sys


def main() -> None:
    bootstrap, topic = sys.argv[1:3]
    try:
        import numpy  # noqa: F401
        print("numpy: importable")
    except ImportError:
        print("numpy: absent")
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from kraft import spark_connector

    spark = (SparkSession.builder.master("local[1]").appName("kraft-value-only-write")
             .config("spark.ui.enabled", "false").config("spark.task.maxFailures", "1").getOrCreate())
    try:
        spark_connector.register(spark)
        for rows, ddl in [([("a",)], "value string"), ([("k", "b")], "key string, value string")]:
            (spark.createDataFrame(rows, ddl).write.format("kraft").mode("append")
             .option("kraft.bootstrap.servers", bootstrap).option("topic", topic).save())
        print("written")
        rows = (spark.read.format("kraft").option("kraft.bootstrap.servers", bootstrap)
                .option("subscribe", topic).load().orderBy("offset").collect())
        print("read:", [(r.key, r.value) for r in rows])
    finally:
        spark.stop()


if __name__ == "__main__":
    main()

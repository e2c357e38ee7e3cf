"""Spark read/write throughput against a running kraft node (issue 25's goal: local[2] writing and
reading 1,000,000 100-byte records >= 1,000,000 records/s each).

    python -m kraft.spark_connector.bench --bootstrap 127.0.0.1:9092 [--records 1000000] [--partitions 4] [--rounds 3]

Writes the records with the sink (timed), then reads them back with the source (timed), and prints
records/s for both, once per round, each round through a fresh topic named spark-bench-<random>.
First, unless --no-warmup, it writes and reads 10,000 records through a topic of their own, so that
the session's one-time start-up (the first Python workers, the data source's first planning) is not
timed. The JVM compiles the hot loops over the first rounds, so later rounds run faster.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from typing import Any

import click
import requests


@click.command()
@click.option("--bootstrap", default="127.0.0.1:9092", show_default=True)
@click.option("--records", default=1_000_000, show_default=True)
@click.option("--record-size", default=100, show_default=True)
@click.option("--partitions", default=4, show_default=True)
@click.option("--master", default="local[2]", show_default=True)
@click.option("--warmup/--no-warmup", default=True, show_default=True,
              help="Write and read 10,000 records untimed first.")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="Timed write-and-read rounds, each printed.")
def main(bootstrap: str, records: int, record_size: int, partitions: int, master: str, warmup: bool,
         rounds: int) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kraft import spark_connector

    spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark_connector.register(spark)
    if warmup:
        _round_trip(spark, bootstrap, 10_000, record_size, partitions)
    for round_ in range(1, rounds + 1):
        write_s, read_s = _round_trip(spark, bootstrap, records, record_size, partitions)
        prefix = f"round {round_}: " if rounds > 1 else ""
        click.echo(f"{prefix}write: {records:,} x {record_size} B in {write_s:.2f} s = {records / write_s:,.0f} records/s")
        click.echo(f"{prefix}read:  {records:,} x {record_size} B in {read_s:.2f} s = {records / read_s:,.0f} records/s")
    spark.stop()


def _round_trip(spark: Any, bootstrap: str, records: int, record_size: int, partitions: int) -> tuple[float, float]:
    """Writes `records` to a fresh topic and reads them back; the seconds each took."""
    topic = f"spark-bench-{uuid.uuid4().hex[:8]}"
    response = requests.post(f"http://{bootstrap.split(',')[0]}/v1/topics",
                             json={"name": topic, "partitions": partitions}, timeout=30)
    response.raise_for_status()
    df = spark.range(records, numPartitions=partitions).selectExpr(
        f"cast(rpad(cast(id as string), {record_size}, 'x') as binary) as value")
    df.cache().count()
    started = time.perf_counter()
    df.write.format("kraft").mode("append").option("kraft.bootstrap.servers", bootstrap).option("topic", topic).save()
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    read = (spark.read.format("kraft").option("kraft.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("minPartitions", str(partitions)).load())
    count = read.selectExpr("sum(length(value))", "count(*)").collect()[0][1]
    read_s = time.perf_counter() - started
    df.unpersist()
    assert count == records, f"read {count} records, wrote {records}"
    return write_s, read_s


if __name__ == "__main__":
    main()

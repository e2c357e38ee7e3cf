"""`kraft-bench consume`: consumer throughput from the beginning of a topic
(kafka-consumer-perf-test)."""

from __future__ import annotations

import time

import click

from kraft.api.client import Consumer
from kraft.bench.common import (BenchResult, Progress, common_options, consumer_perf_summary, ensure_topic, main,
                                print_format_option, record_bytes, report)

@main.command()
@common_options
@click.option("--timeout-ms", type=click.IntRange(min=1), default=10_000, show_default=True, help="Give up after this long without records.")
@print_format_option
def consume(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, timeout_ms: int, print_format: str,
) -> None:
    """Consumer throughput from the beginning of the topic (kafka-consumer-perf-test).
    Produce first; --record-size and --partitions only matter if the topic is created here."""
    result, start_wall = measure_consume(bootstrap_server, topic, num_records=num_records, partitions=partitions,
                                         replication_factor=replication_factor, timeout_ms=timeout_ms)
    report(result, json_path, consumer_perf_summary(result, start_wall) if print_format == "kafka" else None)
    if result.records < num_records:
        raise click.ClickException(f"only {result.records} of {num_records} records arrived within {timeout_ms} ms "
                                   "of silence")


def measure_consume(bootstrap: str, topic: str, *, num_records: int, partitions: int = 1,
                    replication_factor: int = 1, timeout_ms: int = 10_000) -> tuple[BenchResult, float]:
    """One consume run from the beginning of `topic`, and its wall-clock start; fewer records
    than asked when `timeout_ms` passed without any."""
    ensure_topic(bootstrap, topic, partitions, replication_factor)
    progress = Progress("consume")
    records = nbytes = 0
    with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=10_000) as consumer:
        consumer.assign(consumer.partitions_for_topic(topic))
        consumer.seek_to_beginning()
        start = last = time.monotonic()
        start_wall = time.time()
        while records < num_records:
            got = consumer.poll(timeout_ms=500, max_records=num_records - records)
            now = time.monotonic()
            if not got:
                if (now - last) * 1000 >= timeout_ms:
                    break
                continue
            last = now
            for batch in got.values():
                records += len(batch)
                nbytes += record_bytes(batch)
            progress.update(records, nbytes)
        elapsed = last - start
    # Partitions are assigned, not joined through a group: no rebalance time.
    return BenchResult("consume", dict(topic=topic, num_records=num_records, partitions=partitions), records, nbytes,
                       elapsed), start_wall

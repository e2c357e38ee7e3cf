"""`kraft-bench consume`: consumer throughput from the beginning of a topic
(kafka-consumer-perf-test), with kraft's client over HTTP or Kafka's clients through the Kafka
listener (`--client`, repeatable: each reads the same records, compared in one table)."""

from __future__ import annotations

import time

import click

from kraft.api.client import Consumer
from kraft.api.client.fetcher import ISOLATION_LEVELS, READ_UNCOMMITTED
from kraft.bench.common import (BenchResult, Progress, client_option, common_options, consumer_perf_summary,
                                ensure_topic, main, print_format_option, record_bytes, report_runs)
from kraft.bench.kafka_clients import KRAFT, drain, kafka_consume


@main.command()
@common_options
@click.option("--timeout-ms", type=click.IntRange(min=1), default=10_000, show_default=True, help="Give up after this long without records.")
@click.option("--isolation-level", type=click.Choice(ISOLATION_LEVELS), default=READ_UNCOMMITTED, show_default=True,
              help="read_committed stops at the last stable offset and drops aborted transactions' records.")
@client_option
@print_format_option
def consume(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, timeout_ms: int, isolation_level: str, clients: tuple[str, ...],
    print_format: str,
) -> None:
    """Consumer throughput from the beginning of the topic (kafka-consumer-perf-test).
    Produce first; --record-size and --partitions only matter if the topic is created here."""
    runs = [measure_consume(bootstrap_server, topic, num_records=num_records, partitions=partitions,
                            replication_factor=replication_factor, timeout_ms=timeout_ms, client=client,
                            isolation_level=isolation_level)
            for client in clients]
    starts = {id(result): start_wall for result, start_wall in runs}
    report_runs([result for result, _ in runs], json_path,
                lambda r: consumer_perf_summary(r, starts[id(r)]) if print_format == "kafka" else None)
    short = [r for r, _ in runs if r.records < num_records]
    if short:
        raise click.ClickException(f"only {short[0].records} of {num_records} records arrived within {timeout_ms} ms "
                                   f"of silence ({short[0].params['client']})")


def measure_consume(bootstrap: str, topic: str, *, num_records: int, partitions: int = 1,
                    replication_factor: int = 1, timeout_ms: int = 10_000,
                    client: str = KRAFT, isolation_level: str = READ_UNCOMMITTED) -> tuple[BenchResult, float]:
    """One consume run from the beginning of `topic` with `client`, and its wall-clock start;
    fewer records than asked when `timeout_ms` passed without any."""
    ensure_topic(bootstrap, topic, partitions, replication_factor)
    progress = Progress(f"consume ({client})")
    params = dict(topic=topic, num_records=num_records, partitions=partitions, client=client,
                  isolation_level=isolation_level)
    if client != KRAFT:
        start_wall = time.time()
        records, nbytes, elapsed = kafka_consume(client, bootstrap, topic, num_records, timeout_ms, progress.update,
                                                isolation_level)
        return BenchResult("consume", params, records, nbytes, elapsed), start_wall
    with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=10_000,
                  isolation_level=isolation_level) as consumer:
        consumer.assign(consumer.partitions_for_topic(topic))
        consumer.seek_to_beginning()
        start_wall = time.time()

        def poll(wanted: int) -> tuple[int, int]:
            batches = consumer.poll(timeout_ms=500, max_records=wanted).values()
            return sum(map(len, batches)), sum(map(record_bytes, batches))

        records, nbytes, elapsed = drain(poll, num_records, timeout_ms, progress.update)
    # Partitions are assigned, not joined through a group: no rebalance time.
    return BenchResult("consume", params, records, nbytes, elapsed), start_wall

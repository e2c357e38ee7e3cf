"""`kraft-bench produce`: producer throughput and ack latency (kafka-producer-perf-test)."""

from __future__ import annotations

import random
import time

import click

from kraft.api.client import Producer
from kraft.bench.common import (AckLatencyRecorder, BenchResult, Progress, common_options, ensure_topic, main,
                                make_payload, print_format_option, producer_options, producer_perf_summary, report)

@main.command()
@common_options
@producer_options
@click.option("--throughput", type=int, default=-1, show_default=True, help="Records/s cap; -1 for none.")
@print_format_option
def produce(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, acks: str, batch_size: int, linger_ms: int,
    compression: str, throughput: int, print_format: str,
) -> None:
    """Producer throughput and ack latency (kafka-producer-perf-test)."""
    ensure_topic(bootstrap_server, topic, partitions, replication_factor)
    payload = make_payload(record_size, random.Random(0))
    latencies = AckLatencyRecorder()
    progress = Progress("produce")
    with Producer(bootstrap_server, acks=acks, batch_size=batch_size, linger_ms=linger_ms, compression_type=compression) as producer:
        producer.partitions_for(topic)  # metadata before the clock starts
        send, on_send = producer.send, latencies.on_send
        start = time.monotonic()
        for i in range(num_records):
            on_send(send(topic, payload))
            if i & 1023 == 0:
                progress.update(i, i * record_size)
                if throughput > 0:
                    ahead = i / throughput - (time.monotonic() - start)
                    if ahead > 0:
                        latencies.pause()
                        time.sleep(ahead)
        latencies.pause()
        producer.flush()
        elapsed = time.monotonic() - start
    failed = latencies.failed_records
    result = BenchResult(
        "produce",
        dict(topic=topic, num_records=num_records, record_size=record_size, partitions=partitions,
             replication_factor=replication_factor, acks=acks, batch_size=batch_size,
             linger_ms=linger_ms, compression=compression, throughput=throughput),
        num_records - failed, (num_records - failed) * record_size, elapsed, latencies.latencies_ms(), failed,
    )
    report(result, json_path, [producer_perf_summary(result)] if print_format == "kafka" else None)
    if failed:
        raise click.ClickException(f"{failed} records were not acknowledged")

"""`kraft-bench e2e`: produce-to-consume latency one record at a time (Kafka's EndToEndLatency)."""

from __future__ import annotations

import random
import struct
import time
from typing import Any

import click

from kraft.api.client import Consumer, Producer
from kraft.bench.common import (BenchResult, Progress, bench_target, common_options, ensure_topic, main, make_payload,
                                producer_options, producer_settings, report)
from kraft.bench.histogram import LatencyHistogram

_STAMP = struct.Struct(">q")


@main.command()
@common_options
@producer_options
@click.option("--local-cluster", type=click.IntRange(min=1), default=None,
              help="Start N combined nodes on 127.0.0.1 for this run (stopped after it) instead of "
                   "--bootstrap-server; with --replication-factor 3 the way includes replication.")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=10_000, show_default=True, help="Per-record wait for the consumer.")
def e2e(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, acks: str, batch_size: int, linger_ms: int,
    compression: str, idempotence: bool | None, max_in_flight: int | None, local_cluster: int | None,
    timeout_ms: int,
) -> None:
    """Produce-to-consume latency, one record at a time (Kafka's EndToEndLatency): each record
    carries its send time; the consumer measures when it can read it (below the high watermark,
    so with replicas after every in-sync follower has it)."""
    with bench_target(bootstrap_server, local_cluster, False) as (bootstrap, _pids):
        ensure_topic(bootstrap, topic, partitions, replication_factor)
        latency, elapsed = _round_trips(bootstrap, topic, num_records, record_size, acks, batch_size, linger_ms,
                                        compression, producer_settings(acks, idempotence, max_in_flight), timeout_ms)
    report(
        BenchResult(
            "e2e",
            dict(topic=topic, num_records=num_records, record_size=record_size, partitions=partitions,
                 replication_factor=replication_factor, acks=acks, linger_ms=linger_ms, compression=compression),
            num_records, num_records * record_size, elapsed, latency,
        ),
        json_path,
    )


def _round_trips(bootstrap: str, topic: str, num_records: int, record_size: int, acks: str, batch_size: int,
                 linger_ms: int, compression: str, settings: dict[str, Any], timeout_ms: int) -> tuple[LatencyHistogram, float]:
    padding = make_payload(max(0, record_size - _STAMP.size), random.Random(0))
    latency = LatencyHistogram()
    progress = Progress("e2e")
    with Producer(bootstrap, acks=acks, batch_size=batch_size, linger_ms=linger_ms, compression_type=compression,
                  **settings) as producer, \
            Consumer(bootstrap, fetch_max_wait_ms=100) as consumer:
        consumer.assign(consumer.partitions_for_topic(topic))
        consumer.seek_to_end()
        for tp in consumer.assignment():
            consumer.position(tp)  # resolve "latest" before the first send
        start = time.monotonic()
        for i in range(num_records):
            producer.send(topic, _STAMP.pack(time.time_ns()) + padding)
            deadline = time.monotonic() + timeout_ms / 1000
            received = False
            while not received:
                if time.monotonic() > deadline:
                    raise click.ClickException(f"record {i} not consumed within {timeout_ms} ms")
                for records in consumer.poll(timeout_ms=100, max_records=1).values():
                    sent_ns = _STAMP.unpack_from(records[0].value or b"\0" * 8)[0]
                    latency.record_us((time.time_ns() - sent_ns) // 1000)
                    received = True
            progress.update(i + 1, (i + 1) * record_size)
        return latency, time.monotonic() - start

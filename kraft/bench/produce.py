"""`kraft-bench produce`: producer throughput and ack latency (kafka-producer-perf-test)."""

from __future__ import annotations

import random
import time

import click

from kraft.api.client import Producer
from kraft.bench.common import (AckLatencyRecorder, BenchResult, Observers, Progress, bench_target, common_options,
                                ensure_topic, main, make_payload, observe_options, print_format_option,
                                producer_options, producer_perf_summary, producer_settings, report)


@main.command()
@common_options
@producer_options
@observe_options
@click.option("--throughput", type=int, default=-1, show_default=True,
              help="Records/s, paced evenly (each record at its own due time); -1 for no cap.")
@click.option("--warmup-records", type=click.IntRange(min=0), default=0, show_default=True,
              help="Send and acknowledge this many records first, outside the measurement (Kafka's KIP-1052).")
@print_format_option
def produce(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, acks: str, batch_size: int, linger_ms: int,
    compression: str, idempotence: bool | None, max_in_flight: int | None, local_cluster: int | None, trace: bool,
    profile: bool, profile_pids: tuple[int, ...], throughput: int, warmup_records: int, print_format: str,
) -> None:
    """Producer throughput and ack latency (kafka-producer-perf-test); the latency percentiles
    are over every acknowledged record, from its own send to its acknowledgement."""
    with bench_target(bootstrap_server, local_cluster, trace) as (bootstrap, pids):
        pids.update({f"pid-{p}": p for p in profile_pids})
        observers = Observers("produce", bootstrap, trace, profile, json_path, pids)
        result = measure_produce(bootstrap, topic, num_records=num_records, record_size=record_size,
                                 partitions=partitions, replication_factor=replication_factor, acks=acks,
                                 batch_size=batch_size, linger_ms=linger_ms, compression=compression,
                                 idempotence=idempotence, max_in_flight=max_in_flight, throughput=throughput,
                                 warmup_records=warmup_records, observers=observers)
    report(result, json_path, [producer_perf_summary(result)] if print_format == "kafka" else None)
    if result.errors:
        raise click.ClickException(f"{result.errors} records were not acknowledged")


def measure_produce(
    bootstrap: str, topic: str, *, num_records: int, record_size: int = 100, partitions: int = 1,
    replication_factor: int = 1, acks: str = "1", batch_size: int = 65536, linger_ms: int = 5,
    compression: str = "none", idempotence: bool | None = None, max_in_flight: int | None = None,
    throughput: int = -1, warmup_records: int = 0, observers: Observers | None = None,
) -> BenchResult:
    """One produce run against `bootstrap` (the topic created if needed); `observers` watch
    the measured part (after the warm-up)."""
    ensure_topic(bootstrap, topic, partitions, replication_factor)
    payload = make_payload(record_size, random.Random(0))
    latencies = AckLatencyRecorder()
    progress = Progress("produce")
    settings = producer_settings(acks, idempotence, max_in_flight)
    with Producer(bootstrap, acks=acks, batch_size=batch_size, linger_ms=linger_ms, compression_type=compression,
                  **settings) as producer:
        producer.partitions_for(topic)  # metadata before the clock starts
        if warmup_records:  # connections, the logs' first files, the followers' fetchers
            _send_all(producer, topic, payload, warmup_records, throughput, AckLatencyRecorder(), progress)
        if observers is not None:
            observers.start()
        elapsed = _send_all(producer, topic, payload, num_records, throughput, latencies, progress)
    failed = latencies.failed_records
    extra = observers.finish(latencies.traced_records) if observers is not None else {}
    return BenchResult(
        "produce",
        dict(topic=topic, num_records=num_records, record_size=record_size, partitions=partitions,
             replication_factor=replication_factor, acks=acks, batch_size=batch_size,
             linger_ms=linger_ms, compression=compression, throughput=throughput, warmup_records=warmup_records,
             idempotence=settings["enable_idempotence"], max_in_flight=max_in_flight),
        num_records - failed, (num_records - failed) * len(payload), elapsed, latencies.histogram(), failed, extra,
    )


def _send_all(producer: Producer, topic: str, payload: bytes, num_records: int, throughput: int,
              latencies: AckLatencyRecorder, progress: Progress) -> float:
    """Sends every record (paced: record i at start + i / throughput, never in bursts ahead of
    time), flushes, and returns the elapsed seconds."""
    send, on_send, clock = producer.send, latencies.on_send, time.perf_counter
    start = clock()
    interval = 1 / throughput if throughput > 0 else 0.0
    for i in range(num_records):
        if interval:
            ahead = start + i * interval - clock()
            if ahead > 0:
                time.sleep(ahead)
        on_send(send(topic, payload))
        if i & 1023 == 0:
            progress.update(i, i * len(payload))
    latencies.pause()
    producer.flush()
    return clock() - start

"""`kraft-bench produce`: producer throughput and ack latency (kafka-producer-perf-test), with
kraft's client over HTTP or Kafka's clients through the Kafka listener (`--client`, repeatable:
the runs one after the other, compared in one table)."""

from __future__ import annotations

import random
import time
import uuid

import click

from kraft.api.client import Producer
from kraft.bench.common import (AckLatencyRecorder, BenchResult, Observers, Progress, bench_target, client_option,
                                common_options, ensure_topic, main, make_payload, observe_options,
                                print_format_option, producer_options, producer_perf_summary, producer_settings,
                                report_runs)
from kraft.bench.histogram import LatencyHistogram
from kraft.bench.kafka_clients import KRAFT, kafka_produce


@main.command()
@common_options
@producer_options
@observe_options
@click.option("--throughput", type=int, default=-1, show_default=True,
              help="Records/s, paced evenly (each record at its own due time); -1 for no cap.")
@click.option("--send-many", type=click.IntRange(min=0), default=0, show_default=True,
              help="Queue records with Producer.send_many, this many per call (an application holding many "
                   "records; each record's latency counts from its call's start); 0: send one at a time. "
                   "Not with --throughput or --transactional.")
@click.option("--warmup-records", type=click.IntRange(min=0), default=0, show_default=True,
              help="Send and acknowledge this many records first, outside the measurement (Kafka's KIP-1052).")
@click.option("--transactional", is_flag=True,
              help="A transactional producer (needs --acks all): records in transactions of --commit-every "
                   "records (or --transaction-duration-ms); reports the commit latency too.")
@click.option("--transactional-id", default=None, help="Its transactional id [default: kraft-bench-<random>].")
@click.option("--commit-every", type=click.IntRange(min=1), default=1000, show_default=True,
              help="With --transactional: commit after this many records.")
@click.option("--transaction-duration-ms", type=click.IntRange(min=1), default=None,
              help="With --transactional: also commit once a transaction is this old (kafka-producer-perf-test's).")
@client_option
@print_format_option
def produce(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, acks: str, batch_size: int, linger_ms: int,
    compression: str, idempotence: bool | None, max_in_flight: int | None, local_cluster: int | None, trace: bool,
    profile: bool, profile_pids: tuple[int, ...], throughput: int, send_many: int, warmup_records: int,
    transactional: bool,
    transactional_id: str | None, commit_every: int, transaction_duration_ms: int | None, clients: tuple[str, ...],
    print_format: str,
) -> None:
    """Producer throughput and ack latency (kafka-producer-perf-test); the latency percentiles
    are over every acknowledged record, from its own send to its acknowledgement."""
    if transactional_id is not None or transaction_duration_ms is not None:
        transactional = True
    if transactional and acks not in ("all", "-1"):
        raise click.UsageError("--transactional needs --acks all (a transactional producer is idempotent)")
    if transactional and set(clients) != {KRAFT}:
        raise click.UsageError("--transactional runs with --client kraft only")
    if send_many and (transactional or throughput > 0 or set(clients) != {KRAFT}):
        raise click.UsageError("--send-many runs with --client kraft only, without --throughput or --transactional")
    txn = Transactions(transactional_id or f"kraft-bench-{uuid.uuid4().hex[:8]}", commit_every,
                       transaction_duration_ms) if transactional else None
    results = []
    with bench_target(bootstrap_server, local_cluster, trace) as (bootstrap, pids):
        pids.update({f"pid-{p}": p for p in profile_pids})
        for client in clients:
            observers = Observers("produce", bootstrap, trace, profile, json_path, pids)
            results.append(measure_produce(
                bootstrap, topic, num_records=num_records, record_size=record_size, partitions=partitions,
                replication_factor=replication_factor, acks=acks, batch_size=batch_size, linger_ms=linger_ms,
                compression=compression, idempotence=idempotence, max_in_flight=max_in_flight,
                throughput=throughput, send_many=send_many, warmup_records=warmup_records, observers=observers,
                transactions=txn, client=client))
    report_runs(results, json_path, lambda r: [producer_perf_summary(r)] if print_format == "kafka" else None)
    errors = sum(r.errors for r in results)
    if errors:
        raise click.ClickException(f"{errors} records were not acknowledged")


def measure_produce(
    bootstrap: str, topic: str, *, num_records: int, record_size: int = 100, partitions: int = 1,
    replication_factor: int = 1, acks: str = "1", batch_size: int = 65536, linger_ms: int = 5,
    compression: str = "none", idempotence: bool | None = None, max_in_flight: int | None = None,
    throughput: int = -1, send_many: int = 0, warmup_records: int = 0, observers: Observers | None = None,
    transactions: Transactions | None = None, client: str = KRAFT,
) -> BenchResult:
    """One produce run against `bootstrap` (the topic created if needed) with `client`;
    `observers` watch the measured part (after the warm-up); `transactions`: a transactional
    producer's (kraft's client only); `send_many`: records per `Producer.send_many` call (0: `send`
    one at a time; unpaced, not transactional)."""
    ensure_topic(bootstrap, topic, partitions, replication_factor)
    payload = make_payload(record_size, random.Random(0))
    progress = Progress(f"produce ({client})")
    settings = producer_settings(acks, idempotence, max_in_flight)
    params = dict(topic=topic, num_records=num_records, record_size=record_size, partitions=partitions,
                  replication_factor=replication_factor, acks=acks, batch_size=batch_size, linger_ms=linger_ms,
                  compression=compression, throughput=throughput, send_many=send_many, warmup_records=warmup_records,
                  idempotence=settings["enable_idempotence"] or transactions is not None, max_in_flight=max_in_flight,
                  client=client)
    if client != KRAFT:
        elapsed, histogram, failed, traced = kafka_produce(
            client, bootstrap, topic, payload, num_records, acks=acks, batch_size=batch_size, linger_ms=linger_ms,
            compression=compression, idempotence=settings["enable_idempotence"], max_in_flight=max_in_flight,
            throughput=throughput, progress=progress.update, warmup_records=warmup_records,
            measuring=observers.start if observers is not None else lambda: None,
            trace=observers is not None and observers.tracing)
        extra = observers.finish(lambda: traced) if observers is not None else {}
        return BenchResult("produce", params, num_records - failed, (num_records - failed) * len(payload), elapsed,
                           histogram, failed, extra)
    latencies = AckLatencyRecorder()
    if transactions is not None:
        settings = {**settings, "enable_idempotence": True, "transactional_id": transactions.transactional_id}
    with Producer(bootstrap, acks=acks, batch_size=batch_size, linger_ms=linger_ms, compression_type=compression,
                  **settings) as producer:
        producer.partitions_for(topic)  # metadata before the clock starts
        if transactions is not None:
            producer.init_transactions()
        if warmup_records:  # connections, the logs' first files, the followers' fetchers
            warmup = None if transactions is None else transactions.fresh()
            _send_all(producer, topic, payload, warmup_records, throughput, AckLatencyRecorder(), progress, warmup,
                      send_many)
        if observers is not None:
            observers.start()
        elapsed = _send_all(producer, topic, payload, num_records, throughput, latencies, progress, transactions,
                            send_many)
    failed = latencies.failed_records
    extra = observers.finish(latencies.traced_records) if observers is not None else {}
    return BenchResult(
        "produce", {**params, **({} if transactions is None else transactions.params())},
        num_records - failed, (num_records - failed) * len(payload), elapsed, latencies.histogram(), failed,
        {**extra, **({} if transactions is None else transactions.summary())},
    )


class Transactions:
    """A transactional run's transactions: one begins before a record is sent when none is open,
    and commits after `commit_every` records or once `duration_ms` old (and at the end); each
    commit's latency (commit_transaction: flush, then EndTxn) is recorded."""

    def __init__(self, transactional_id: str, commit_every: int, duration_ms: int | None) -> None:
        self.transactional_id = transactional_id
        self.commit_every = commit_every
        self.duration_ms = duration_ms
        self.commits = LatencyHistogram()
        self._open_since: float | None = None
        self._records = 0

    def fresh(self) -> Transactions:
        """The same settings with nothing recorded (the warm-up's)."""
        return Transactions(self.transactional_id, self.commit_every, self.duration_ms)

    def due(self, now: float) -> bool:
        """The open transaction is to commit before the next record."""
        return self._open_since is not None and (self._records >= self.commit_every or (
            self.duration_ms is not None and (now - self._open_since) * 1000 >= self.duration_ms))

    def before_send(self, producer: Producer, now: float) -> None:
        if self._open_since is None:
            producer.begin_transaction()
            self._open_since, self._records = now, 0
        self._records += 1

    def commit(self, producer: Producer) -> None:
        if self._open_since is None:
            return
        started = time.perf_counter()
        producer.commit_transaction()
        self.commits.record_us(round((time.perf_counter() - started) * 1_000_000))
        self._open_since = None

    def params(self) -> dict[str, object]:
        return {"transactional": True, "commit_every": self.commit_every,
                "transaction_duration_ms": self.duration_ms}

    def summary(self) -> dict[str, object]:
        return {"commits": self.commits.count,
                **{f"commit_{key}": value for key, value in self.commits.summary_ms().items()}}


def _send_all(producer: Producer, topic: str, payload: bytes, num_records: int, throughput: int,
              latencies: AckLatencyRecorder, progress: Progress, transactions: Transactions | None = None,
              send_many: int = 0) -> float:
    """Sends every record (paced: record i at start + i / throughput, never in bursts ahead of
    time; `send_many` records per call when set), flushes (commits, when transactional), and
    returns the elapsed seconds."""
    send, on_send, clock = producer.send, latencies.on_send, time.perf_counter
    start = clock()
    if send_many:
        values = [payload] * send_many
        for i in range(0, num_records, send_many):
            sent = clock()
            batch = values if num_records - i >= send_many else values[:num_records - i]
            latencies.on_send_many(producer.send_many(topic, batch), sent)
            progress.update(i, i * len(payload))
        latencies.pause()
        producer.flush()
        return clock() - start
    interval = 1 / throughput if throughput > 0 else 0.0
    for i in range(num_records):
        if interval:
            ahead = start + i * interval - clock()
            if ahead > 0:
                time.sleep(ahead)
        if transactions is not None:
            now = clock()
            if transactions.due(now):
                latencies.pause()  # the loop waits for the commit: no send is late by it
                transactions.commit(producer)
                now = clock()
            transactions.before_send(producer, now)
        on_send(send(topic, payload))
        if i & 1023 == 0:
            progress.update(i, i * len(payload))
    latencies.pause()
    if transactions is not None:
        transactions.commit(producer)
    producer.flush()
    return clock() - start

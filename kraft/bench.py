"""`kraft-bench`: throughput and latency measurements (kafka-producer-perf-test,
kafka-consumer-perf-test, EndToEndLatency).

Every subcommand returns a `BenchResult` and goes through `report()`: a progress line on stderr
about every second while it runs, then a rich table on stdout and, with `--json FILE`, one JSON
object (`records_per_sec`, `mb_per_sec`, `p50_ms`, `p99_ms`, `p999_ms` and the parameters) so
runs can be compared between commits. Later measurements (failover, metadata scale, chaos) are new
subcommands of `main` built the same way.
"""

from __future__ import annotations

import json
import random
import string
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

import click

from api.client import Admin, Consumer, KraftError, Producer, RecordFuture
from api.client.futures import ProduceResult
from log.batch import COMPRESSIONS

PROGRESS_INTERVAL_S = 1.0


# -- measurements (pure) ----------------------------------------------------------------------


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]) of already sorted values; None when empty."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil(n * q / 100), at least 1
    return sorted_values[int(min(rank, len(sorted_values))) - 1]


@dataclass
class _Run:
    """Consecutive sends into one producer batch: they share one completion time."""

    first_s: float
    last_s: float
    count: int = 0
    done_s: float | None = None
    failed: bool = False


class AckLatencyRecorder:
    """Ack latency per record (send to future completion) at the cost of one clock read and one
    identity check per record: records of one batch complete together, so a single callback per
    batch timestamps them all, and each record's send time is interpolated over the batch's run of
    sends."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._runs: list[_Run] = []
        self._current: ProduceResult | None = None
        self._run: _Run | None = None

    def on_send(self, future: RecordFuture) -> None:
        now = self._clock()
        result = future.produce_result
        run = self._run
        if result is not self._current or run is None:
            run = self._run = _Run(now, now)
            self._current = result
            self._runs.append(run)
            result.add_done_callback(lambda r, run=run: self._on_done(run, r))
        run.last_s = now
        run.count += 1

    def _on_done(self, run: _Run, result: ProduceResult) -> None:
        run.done_s = self._clock()
        run.failed = result.error is not None

    @property
    def failed_records(self) -> int:
        return sum(r.count for r in self._runs if r.failed)

    def latencies_ms(self) -> list[float]:
        """Sorted per-record latencies of the acknowledged records."""
        out: list[float] = []
        for run in self._runs:
            if run.done_s is None or run.failed:
                continue
            step = (run.last_s - run.first_s) / (run.count - 1) if run.count > 1 else 0.0
            base = (run.done_s - run.first_s) * 1000
            step_ms = step * 1000
            out.extend(base - i * step_ms for i in range(run.count))
        out.sort()
        return out


@dataclass
class BenchResult:
    name: str
    params: dict[str, Any]
    records: int
    bytes: int
    elapsed_s: float
    latencies_ms: list[float] = field(default_factory=list)  # sorted
    errors: int = 0

    def summary(self) -> dict[str, Any]:
        elapsed = max(self.elapsed_s, 1e-9)
        out: dict[str, Any] = {
            "bench": self.name,
            "records": self.records,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 3),
            "records_per_sec": round(self.records / elapsed, 1),
            "mb_per_sec": round(self.bytes / elapsed / 1024 / 1024, 3),
        }
        for key, q in (("p50_ms", 50), ("p99_ms", 99), ("p999_ms", 99.9)):
            value = percentile(self.latencies_ms, q)
            out[key] = None if value is None else round(value, 3)
        out.update(self.params)
        return out


class Progress:
    """Prints `<label>: N records, R rec/s, M MB/s` on stderr about once a second."""

    def __init__(self, label: str, out: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._label = label
        self._out = out or sys.stderr
        self._clock = clock
        self._last_time = clock()
        self._last_records = 0
        self._last_bytes = 0

    def update(self, records: int, nbytes: int) -> None:
        now = self._clock()
        elapsed = now - self._last_time
        if elapsed < PROGRESS_INTERVAL_S:
            return
        rate = (records - self._last_records) / elapsed
        mb = (nbytes - self._last_bytes) / elapsed / 1024 / 1024
        print(f"{self._label}: {records} records, {rate:,.0f} rec/s, {mb:.2f} MB/s", file=self._out, flush=True)
        self._last_time, self._last_records, self._last_bytes = now, records, nbytes


def report(result: BenchResult, json_path: str | None) -> dict[str, Any]:
    from rich.console import Console
    from rich.table import Table

    summary = result.summary()
    table = Table("metric", "value", title=f"kraft-bench {result.name}", title_justify="left")
    for key, value in summary.items():
        table.add_row(key, "-" if value is None else str(value))
    Console(file=click.get_text_stream("stdout"), soft_wrap=True).print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True)
            f.write("\n")
    return summary


def make_payload(size: int, rng: random.Random) -> bytes:
    """Random uppercase letters, like kafka-producer-perf-test (so compression has some work)."""
    return "".join(rng.choices(string.ascii_uppercase, k=size)).encode()


# -- commands ---------------------------------------------------------------------------------


def ensure_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int) -> None:
    with Admin(bootstrap) as admin:
        try:
            admin.create_topic(topic, partitions, replication_factor)
        except KraftError as e:
            if e.error_code != "TOPIC_ALREADY_EXISTS":
                raise


class BenchGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KraftError as e:
            raise click.ClickException(str(e)) from e


@click.group(cls=BenchGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """kraft-bench: produce/consume throughput and latency against a running cluster."""


def common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--bootstrap-server", default="127.0.0.1:9092", show_default=True),
        click.option("--topic", default="kraft-bench", show_default=True),
        click.option("--num-records", type=click.IntRange(min=1), default=100_000, show_default=True),
        click.option("--record-size", type=click.IntRange(min=1), default=100, show_default=True),
        click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True, help="Used when the topic is created."),
        click.option("--replication-factor", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def producer_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--acks", type=click.Choice(["0", "1", "-1", "all"]), default="1", show_default=True),
        click.option("--batch-size", type=click.IntRange(min=1), default=16384 * 4, show_default=True),
        click.option("--linger-ms", type=click.IntRange(min=0), default=5, show_default=True),
        click.option("--compression", type=click.Choice(COMPRESSIONS), default="none", show_default=True),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@main.command()
@common_options
@producer_options
@click.option("--throughput", type=int, default=-1, show_default=True, help="Records/s cap; -1 for none.")
def produce(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, acks: str, batch_size: int, linger_ms: int,
    compression: str, throughput: int,
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
                        time.sleep(ahead)
        producer.flush()
        elapsed = time.monotonic() - start
    failed = latencies.failed_records
    report(
        BenchResult(
            "produce",
            dict(topic=topic, num_records=num_records, record_size=record_size, partitions=partitions,
                 replication_factor=replication_factor, acks=acks, batch_size=batch_size,
                 linger_ms=linger_ms, compression=compression, throughput=throughput),
            num_records - failed, (num_records - failed) * record_size, elapsed, latencies.latencies_ms(), failed,
        ),
        json_path,
    )
    if failed:
        raise click.ClickException(f"{failed} records were not acknowledged")


@main.command()
@common_options
@click.option("--timeout-ms", type=click.IntRange(min=1), default=10_000, show_default=True, help="Give up after this long without records.")
def consume(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, timeout_ms: int,
) -> None:
    """Consumer throughput from the beginning of the topic (kafka-consumer-perf-test).
    Produce first; --record-size and --partitions only matter if the topic is created here."""
    ensure_topic(bootstrap_server, topic, partitions, replication_factor)
    progress = Progress("consume")
    records = nbytes = 0
    with Consumer(bootstrap_server, auto_offset_reset="earliest", max_poll_records=10_000) as consumer:
        consumer.assign(consumer.partitions_for_topic(topic))
        consumer.seek_to_beginning()
        start = last = time.monotonic()
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
                nbytes += sum(len(r.value or b"") + len(r.key or b"") for r in batch)
            progress.update(records, nbytes)
        elapsed = last - start
    report(BenchResult("consume", dict(topic=topic, num_records=num_records, partitions=partitions), records, nbytes, elapsed), json_path)
    if records < num_records:
        raise click.ClickException(f"only {records} of {num_records} records arrived within {timeout_ms} ms of silence")


_STAMP = struct.Struct(">q")


@main.command()
@common_options
@producer_options
@click.option("--timeout-ms", type=click.IntRange(min=1), default=10_000, show_default=True, help="Per-record wait for the consumer.")
def e2e(
    bootstrap_server: str, topic: str, num_records: int, record_size: int, partitions: int,
    replication_factor: int, json_path: str | None, acks: str, batch_size: int, linger_ms: int,
    compression: str, timeout_ms: int,
) -> None:
    """Produce-to-consume latency, one record at a time (Kafka's EndToEndLatency): each record
    carries its send time; the consumer measures when it can read it."""
    ensure_topic(bootstrap_server, topic, partitions, replication_factor)
    padding = make_payload(max(0, record_size - _STAMP.size), random.Random(0))
    latencies: list[float] = []
    progress = Progress("e2e")
    with Producer(bootstrap_server, acks=acks, batch_size=batch_size, linger_ms=linger_ms, compression_type=compression) as producer, \
            Consumer(bootstrap_server, fetch_max_wait_ms=100) as consumer:
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
                    latencies.append((time.time_ns() - sent_ns) / 1e6)
                    received = True
            progress.update(i + 1, (i + 1) * record_size)
        elapsed = time.monotonic() - start
    latencies.sort()
    report(
        BenchResult(
            "e2e",
            dict(topic=topic, num_records=num_records, record_size=record_size, partitions=partitions,
                 replication_factor=replication_factor, acks=acks, linger_ms=linger_ms, compression=compression),
            num_records, num_records * record_size, elapsed, latencies,
        ),
        json_path,
    )


if __name__ == "__main__":
    sys.exit(main())

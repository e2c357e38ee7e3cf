"""What every `kraft-bench` subcommand shares: the click group, the common options, the
measurements (percentiles, per-record ack latency), the progress line and `report()` (a rich table
on stdout and, with `--json FILE`, one JSON object per run so runs can be compared between commits).
"""

from __future__ import annotations

import json
import operator
import random
import string
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

import click

from kraft.api.cli.common import version_option
from kraft.api.client import Admin, ConsumerRecord, KraftError, RecordFuture
from kraft.api.client.futures import ProduceResult
from kraft.log.batch import COMPRESSIONS

PROGRESS_INTERVAL_S = 1.0
_KEY = operator.attrgetter("key")
_VALUE = operator.attrgetter("value")


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
    end_s: float | None = None  # when the next run started (or the sends paused)
    count: int = 0
    done_s: float | None = None
    failed: bool = False


class AckLatencyRecorder:
    """Ack latency per record (send to future completion) at the cost of one identity check per
    record: records of one batch complete together, so a single callback per batch timestamps them
    all. The clock is read when a run of sends into one batch starts; a record's send time is
    interpolated over its run, which ends where the next run starts or at `pause()` (call it
    before the sending loop sleeps or stops)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._runs: list[_Run] = []
        self._current: ProduceResult | None = None
        self._run = _Run(0.0)
        self._count = 0  # sends in the current run (kept here: on_send runs per record)

    def on_send(self, future: RecordFuture) -> None:
        if future.produce_result is self._current:
            self._count += 1
            return
        self.pause()
        result = self._current = future.produce_result
        run = self._run = _Run(self._clock())
        self._count = 1
        self._runs.append(run)
        result.add_done_callback(lambda r, run=run: self._on_done(run, r))

    def pause(self) -> None:
        """Ends the current run now: the next send starts a new one."""
        if self._current is not None:
            self._run.end_s = self._clock()
            self._run.count = self._count
            self._current = None

    def _on_done(self, run: _Run, result: ProduceResult) -> None:
        run.done_s = self._clock()
        run.failed = result.error is not None

    @property
    def failed_records(self) -> int:
        self.pause()
        return sum(r.count for r in self._runs if r.failed)

    def latencies_ms(self) -> list[float]:
        """Sorted per-record latencies of the acknowledged records."""
        self.pause()
        out: list[float] = []
        for run in self._runs:
            if run.done_s is None or run.failed:
                continue
            end = min(run.done_s, run.end_s if run.end_s is not None else run.first_s)
            step_ms = (end - run.first_s) * 1000 / run.count
            base = (run.done_s - run.first_s) * 1000
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


def producer_perf_summary(result: BenchResult) -> str:
    """kafka-producer-perf-test's closing line (ProducerPerformance.Stats.printTotal): Java's %f
    for records/sec, latencies as whole ms with its percentile index (int)(p * n) of the sorted list."""
    elapsed_ms = max(result.elapsed_s * 1000, 1e-9)
    latencies = [int(v) for v in result.latencies_ms]
    count = result.records
    percs = [latencies[int(p * len(latencies))] if latencies else 0 for p in (0.5, 0.95, 0.99, 0.999)]
    avg = sum(latencies) / count if count else float("nan")
    return (f"{count} records sent, {1000.0 * count / elapsed_ms:f} records/sec "
            f"({1000.0 * result.bytes / elapsed_ms / (1024 * 1024):.2f} MB/sec), {avg:.2f} ms avg latency, "
            f"{float(max(latencies, default=0)):.2f} ms max latency, {percs[0]} ms 50th, {percs[1]} ms 95th, "
            f"{percs[2]} ms 99th, {percs[3]} ms 99.9th.")


CONSUMER_PERF_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def consumer_perf_summary(result: BenchResult, start_wall_s: float, rebalance_ms: int = 0) -> list[str]:
    """kafka-consumer-perf-test's header and summary line (ConsumerPerformance, not --show-detailed-stats):
    times as yyyy-MM-dd HH:mm:ss:SSS local time, rates with %.4f; fetch time excludes the rebalance."""
    def stamp(wall_s: float) -> str:
        t = time.localtime(wall_s)
        return time.strftime("%Y-%m-%d %H:%M:%S", t) + f":{int(wall_s * 1000) % 1000:03d}"

    elapsed_ms = int(result.elapsed_s * 1000)
    fetch_ms = elapsed_ms - rebalance_ms
    mb = result.bytes / (1024 * 1024)
    elapsed_s, fetch_s = max(elapsed_ms, 1) / 1000, max(fetch_ms, 1) / 1000
    return [CONSUMER_PERF_HEADER,
            f"{stamp(start_wall_s)}, {stamp(start_wall_s + elapsed_ms / 1000)}, {mb:.4f}, {mb / elapsed_s:.4f}, "
            f"{result.records}, {result.records / elapsed_s:.4f}, {rebalance_ms}, {fetch_ms}, {mb / fetch_s:.4f}, "
            f"{result.records / fetch_s:.4f}"]


def print_format_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--print-format", type=click.Choice(["table", "kafka"]), default="table", show_default=True,
                        help="table, or kafka: the summary as kafka-producer/consumer-perf-test prints it.")(f)


def report(result: BenchResult, json_path: str | None, kafka_lines: list[str] | None = None) -> dict[str, Any]:
    """The summary as a table on stdout, or `kafka_lines` when given (--print-format kafka)."""
    from rich.console import Console
    from rich.table import Table

    summary = result.summary()
    if kafka_lines is not None:
        click.echo("\n".join(kafka_lines))
    else:
        table = Table("metric", "value", title=f"kraft-bench {result.name}", title_justify="left")
        for key, value in summary.items():
            table.add_row(key, "-" if value is None else str(value))
        Console(file=click.get_text_stream("stdout"), soft_wrap=True).print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True)
            f.write("\n")
    return summary


def record_bytes(records: list[ConsumerRecord]) -> int:
    """Key and value bytes of consumed records, summed at C speed (this runs per record)."""
    return sum(map(len, filter(None, map(_KEY, records)))) + sum(map(len, filter(None, map(_VALUE, records))))


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
    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Every subcommand takes `--version`, as every `kraft` tool does."""
        if not any("--version" in p.opts for p in cmd.params):
            version_option(cmd)
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KraftError as e:
            raise click.ClickException(str(e)) from e


@click.group(cls=BenchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@version_option
def main() -> None:
    """kraft-bench: produce/consume throughput and latency against a running cluster."""


def common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--bootstrap-server", default="127.0.0.1:9092", show_default=True, envvar="KRAFT_BOOTSTRAP_SERVER",
                     help="HOST:PORT[,HOST:PORT] (or $KRAFT_BOOTSTRAP_SERVER, as for every kraft tool)."),
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

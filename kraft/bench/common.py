"""What every `kraft-bench` subcommand shares: the click group, the common options, the
measurements (percentiles, per-record ack latency), the progress line and `report()` (a rich table
on stdout and, with `--json FILE`, one JSON object per run so runs can be compared between commits).
"""

from __future__ import annotations

import json
import operator
import os
from array import array
from itertools import repeat
import random
import string
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

import click

from kraft.api.cli.common import version_option
from kraft.api.client import Admin, ConsumerRecord, KraftError, RecordFuture
from kraft.api.client.futures import ProduceResult, RecordFutures
from kraft.api.client.types import TopicPartition
from kraft.bench.histogram import LatencyHistogram
from kraft.bench.kafka_clients import CLIENTS, KRAFT
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


@dataclass(slots=True)
class _Run:
    """Consecutive sends into one producer batch: they complete together."""

    result: ProduceResult
    first: int  # index of its first send in the recorder's send times
    first_in_batch: int  # the batch index of its first record (its offset less the base offset)
    count: int = 0
    done_s: float | None = None
    done_ns: int = 0  # wall clock at completion (the trace's client_ack)
    failed: bool = False


class AckLatencyRecorder:
    """Ack latency of every record: its own send time (one clock read per send, kept in an
    array) to its batch's completion. Records of one batch complete together, so one callback
    per run of consecutive sends into a batch timestamps them all."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._sends = array("d")
        self._runs: list[_Run] = []
        self._current: ProduceResult | None = None
        self._run: _Run | None = None

    def on_send(self, future: RecordFuture) -> None:
        if future.produce_result is not self._current:
            self._start_run(future.produce_result, future.index)
        self._sends.append(self._clock())

    def on_send_many(self, futures: RecordFutures, sent: float) -> None:
        """The records of one `send_many` call, all sent when the call started (`sent`, this
        recorder's clock: the latency of each counts the whole call)."""
        for result, first, count in futures.runs():
            if result is not self._current:
                self._start_run(result, first)
            self._sends.extend(repeat(sent, count))

    def _start_run(self, result: ProduceResult, first_in_batch: int) -> None:
        self._close_run()
        self._current = result
        run = self._run = _Run(result, len(self._sends), first_in_batch)
        self._runs.append(run)
        result.add_done_callback(lambda r, run=run: self._on_done(run, r))

    def pause(self) -> None:
        """Ends the current run (the next send starts a new one): call it before sleeping."""
        self._close_run()
        self._current = None

    def _close_run(self) -> None:
        if self._run is not None:
            self._run.count = len(self._sends) - self._run.first
            self._run = None

    def _on_done(self, run: _Run, result: ProduceResult) -> None:
        run.done_s = self._clock()
        run.done_ns = time.time_ns()
        run.failed = result.error is not None

    @property
    def failed_records(self) -> int:
        self.pause()
        return sum(r.count for r in self._runs if r.failed)

    def histogram(self) -> LatencyHistogram:
        """Every acknowledged record's latency."""
        self.pause()
        hist = LatencyHistogram()
        sends, record = self._sends, hist.record_us
        for run in self._runs:
            if run.done_s is None or run.failed:
                continue
            done = run.done_s
            for i in range(run.first, run.first + run.count):
                record(round((done - sends[i]) * 1e6))
        return hist

    def traced_records(self) -> list[tuple[TopicPartition, int, int, int, int]]:
        """(partition, offset, send() ns, request sent ns, acknowledged ns; wall clock) of the
        first record of each acknowledged run, the one that waited longest in its batch: what
        `kraft-bench --trace` follows through the nodes."""
        self.pause()
        wall = time.time() - self._clock()  # this clock's reading -> wall-clock seconds
        return [(run.result.tp, run.result.base_offset + run.first_in_batch,
                 int((self._sends[run.first] + wall) * 1e9), run.result.sent_ns, run.done_ns)
                for run in self._runs
                if run.done_s is not None and not run.failed and run.result.base_offset >= 0 and run.count]


@dataclass
class BenchResult:
    name: str
    params: dict[str, Any]
    records: int
    bytes: int
    elapsed_s: float
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # more summary keys (the trace's stages)

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
        out.update(self.latency.summary_ms())
        out.update(self.params)
        out.update(self.extra)
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
    for records/sec, latencies as whole ms (Java's int), percentile p the value at index
    (int)(p * n) of the sorted latencies."""
    elapsed_ms = max(result.elapsed_s * 1000, 1e-9)
    hist = result.latency
    count = result.records
    n = hist.count
    percs = [hist.value_at_rank(int(p * n) + 1) // 1000 if n else 0 for p in (0.5, 0.95, 0.99, 0.999)]
    avg = sum(value // 1000 * c for value, c in hist.buckets()) / count if count else float("nan")
    return (f"{count} records sent, {1000.0 * count / elapsed_ms:f} records/sec "
            f"({1000.0 * result.bytes / elapsed_ms / (1024 * 1024):.2f} MB/sec), {avg:.2f} ms avg latency, "
            f"{float(hist.max_us // 1000):.2f} ms max latency, {percs[0]} ms 50th, {percs[1]} ms 95th, "
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
    """The summary as a table on stdout, or `kafka_lines` when given (--print-format kafka); the
    trace's stages and the profiles' top frames as tables of their own."""
    from rich.console import Console
    from rich.table import Table

    summary = result.summary()
    console = Console(file=click.get_text_stream("stdout"), soft_wrap=True)
    if kafka_lines is not None:
        click.echo("\n".join(kafka_lines))
    else:
        table = Table("metric", "value", title=f"kraft-bench {result.name}", title_justify="left")
        for key, value in summary.items():
            if key not in ("stages", "profiles"):
                table.add_row(key, "-" if value is None else str(value))
        console.print(table)
    if summary.get("stages"):
        table = Table("step", "records", "p50 ms", "p99 ms", "p99.9 ms", "max ms", title="stages (--trace)",
                      title_justify="left")
        for step, s in summary["stages"].items():
            table.add_row(step, str(s["records"]), *(str(s[k]) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms")))
        console.print(table)
    for who, profile in (summary.get("profiles") or {}).items():
        table = Table("own samples", "frame", title=f"profile {who}: {profile.get('file') or profile.get('error')}",
                      title_justify="left")
        for frame, share in profile.get("top", ()):
            table.add_row(f"{share:.1%}", frame)
        console.print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True)
            f.write("\n")
    return summary


def report_runs(results: list[BenchResult], json_path: str | None,
                kafka_lines: Callable[[BenchResult], list[str] | None]) -> list[dict[str, Any]]:
    """One run: `report`. Several (one per `--client`): each run's report, then a table comparing
    them (table format), and the JSON file holds `{"runs": [summary, ...]}`."""
    if len(results) == 1:
        return [report(results[0], json_path, kafka_lines(results[0]))]
    summaries = [report(r, None, kafka_lines(r)) for r in results]
    if kafka_lines(results[0]) is None:
        from rich.console import Console
        from rich.table import Table

        table = Table("client", "records/s", "MB/s", "p50 ms", "p99 ms", "p99.9 ms",
                      title=f"kraft-bench {results[0].name}: the clients compared", title_justify="left")
        for s in summaries:
            table.add_row(str(s["client"]), f"{s['records_per_sec']:,.0f}", str(s["mb_per_sec"]),
                          *("-" if s[k] is None else str(s[k]) for k in ("p50_ms", "p99_ms", "p999_ms")))
        Console(file=click.get_text_stream("stdout"), soft_wrap=True).print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"runs": summaries}, f, indent=2, sort_keys=True)
            f.write("\n")
    return summaries


def client_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--client", "clients", type=click.Choice(CLIENTS), multiple=True, default=(KRAFT,), show_default=True,
        help="kraft (the Python client over HTTP), or kafka-python / confluent-kafka through the Kafka "
             "listener; repeat it to run the same workload with each, one after the other, and compare them.",
    )(f)


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


def observe_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--local-cluster", type=click.IntRange(min=1), default=None,
                     help="Start N combined nodes on 127.0.0.1 for this run (stopped after it) instead of "
                          "--bootstrap-server."),
        click.option("--trace", is_flag=True, help="Per-stage latency of acknowledgements (nodes need "
                                                   "stage.trace.events; --local-cluster sets it)."),
        click.option("--profile", is_flag=True, help="py-spy profiles of the bench and of the nodes it "
                                                     "knows (--local-cluster, --profile-pid), next to the JSON."),
        click.option("--profile-pid", "profile_pids", type=int, multiple=True,
                     help="Also profile this process (a node of the cluster); repeatable."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


TRACE_EVENTS = 1_000_000  # the ring of a --local-cluster node with --trace


@contextmanager
def bench_target(bootstrap: str, local_cluster: int | None, trace: bool) -> Iterator[tuple[str, dict[str, int]]]:
    """(bootstrap, {name: pid} of the nodes started here): `--local-cluster N` combined nodes in a
    temporary directory for the run, else the given cluster."""
    if not local_cluster:
        yield bootstrap, {}
        return
    from kraft.bench.cluster import LocalCluster

    overrides = {"stage.trace.events": TRACE_EVENTS} if trace else {}
    with LocalCluster(local_cluster, overrides=overrides) as cluster:
        pids = {f"node-{i}": n.proc.pid for i, n in cluster.nodes.items() if n.proc is not None}
        yield cluster.bootstrap, pids


class Observers:
    """What `--trace` and `--profile` watch around the measured part of a run."""

    def __init__(self, name: str, bootstrap: str, trace: bool, profile: bool, json_path: str | None,
                 pids: dict[str, int]) -> None:
        from kraft.bench.trace import TraceCollector

        self._collector = TraceCollector(bootstrap) if trace else None
        self._stem = Path(json_path).with_suffix("") if json_path else None
        self._profiler = None
        if profile:
            from kraft.bench.profile import Profiler

            self._profiler = Profiler({"bench": os.getpid(), **pids}, self._stem or Path(f"kraft-bench-{name}"))

    @property
    def tracing(self) -> bool:
        return self._collector is not None

    def start(self) -> None:
        if self._collector is not None:
            self._collector.start()
        if self._profiler is not None:
            self._profiler.start()

    def finish(self, traced: Callable[[], list[Any]]) -> dict[str, Any]:
        """Summary keys: "stages" (from the `traced()` records) and "profiles"."""
        from kraft.bench.trace import StageIndex, stage_histograms, stage_summary

        extra: dict[str, Any] = {}
        if self._profiler is not None:
            extra["profiles"] = self._profiler.stop()
        if self._collector is not None:
            index = StageIndex(self._collector.stop())
            records = traced()
            extra["stages"] = stage_summary(stage_histograms(index, records))
            if self._stem is not None:  # every traced record's way, for a closer look
                path = self._stem.with_name(f"{self._stem.name}.ways.jsonl")
                with open(path, "w") as f:
                    for tp, offset, *times in records:
                        way = index.way(tp, offset, *times)
                        f.write(json.dumps({"topic": tp.topic, "partition": tp.partition, "offset": offset,
                                            **way}) + "\n")
                extra["ways_file"] = os.fspath(path)
        return extra


def producer_settings(acks: str, idempotence: bool | None, max_in_flight: int | None) -> dict[str, Any]:
    """The producer's idempotence and requests in flight from the bench's flags: idempotence on
    with acks=all unless --no-idempotence (Kafka's producer default since 3.0)."""
    return {"enable_idempotence": acks in ("all", "-1") if idempotence is None else idempotence,
            "max_in_flight_requests_per_connection": max_in_flight}


def producer_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--acks", type=click.Choice(["0", "1", "-1", "all"]), default="1", show_default=True),
        click.option("--batch-size", type=click.IntRange(min=1), default=16384 * 4, show_default=True),
        click.option("--linger-ms", type=click.IntRange(min=0), default=5, show_default=True),
        click.option("--compression", type=click.Choice(COMPRESSIONS), default="none", show_default=True),
        click.option("--idempotence/--no-idempotence", default=None,
                     help="enable_idempotence [default: on with --acks all, as Kafka's producer since 3.0]."),
        click.option("--max-in-flight", type=click.IntRange(min=1), default=None,
                     help="max_in_flight_requests_per_connection [default: 5 with idempotence, else 1]."),
    ]
    for option in reversed(options):
        f = option(f)
    return f

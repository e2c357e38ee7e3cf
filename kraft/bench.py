"""`kraft-bench`: throughput and latency measurements (kafka-producer-perf-test,
kafka-consumer-perf-test, EndToEndLatency).

Every subcommand returns a `BenchResult` and goes through `report()`: a progress line on stderr
about every second while it runs, then a rich table on stdout and, with `--json FILE`, one JSON
object (`records_per_sec`, `mb_per_sec`, `p50_ms`, `p99_ms`, `p999_ms` and the parameters) so
runs can be compared between commits. `failover` (controller or broker kill -9 to the first
successful write) and `metadata` (partition creation rate, propagation delay to every broker, image
size) start a throwaway local cluster (`kraft/bench_cluster.py`) since they kill its processes.
"""

from __future__ import annotations

import json
import operator
import random
import signal
import string
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

import click
import requests

from api.client import Admin, Consumer, ConsumerRecord, KraftError, Producer, RecordFuture
from api.client.futures import ProduceResult
from kraft.bench_cluster import LocalCluster, LocalNode, poll
from kraft.broker.replication.chaos import AckedProducer, WatchingConsumer, audit, read_partition
from log.batch import COMPRESSIONS

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
                        latencies.pause()
                        time.sleep(ahead)
        latencies.pause()
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
                nbytes += record_bytes(batch)
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


# -- failover and metadata scale (a throwaway local cluster the bench owns) ----------------------


def _write_topic(nodes: list[Any], name: str) -> bool:
    """One metadata write through any of `nodes` (forwarded to the active controller)."""
    for node in nodes:
        try:
            r = requests.post(f"{node.url}/v1/topics", json={"name": name, "replication_factor": 1}, timeout=2)
        except requests.RequestException:
            continue
        if r.status_code == 201 or r.json().get("error_code") == "TOPIC_ALREADY_EXISTS":
            return True
    return False


def _partition(node: Any, topic: str, partition: int) -> dict[str, Any]:
    topics = requests.get(f"{node.url}/v1/metadata", params={"topics": topic}, timeout=2).json()["topics"]
    return topics[0]["partitions"][partition]


def _produce_one(node: Any, topic: str, partition: int) -> bool:
    r = requests.post(f"{node.url}/v1/topics/{topic}/records", params={"acks": "1"},
                      json={"records": [{"value": "failover", "partition": partition}]}, timeout=2)
    return r.status_code == 200


def _controller_failover(cluster: LocalCluster, run: int) -> dict[str, float]:
    victim = cluster.active_controller()
    survivors = [n for n in cluster.running() if n is not victim]
    killed = time.monotonic()
    victim.kill()
    poll(lambda: _write_topic(survivors, f"failover-{run}"), 60, 0.005, "a metadata write")
    written = time.monotonic()
    victim.start()
    cluster.wait_ready()
    return {"failover_ms": (written - killed) * 1000}


def _broker_failover(cluster: LocalCluster, run: int) -> dict[str, float]:
    controller = cluster.active_controller()
    victim = next(n for n in cluster.brokers() if n is not controller)
    survivors = [n for n in cluster.running() if n is not victim]
    topic = f"broker-failover-{run}"
    assert requests.post(f"{controller.url}/v1/topics", json={"name": topic, "partitions": 6, "replication_factor": 2},
                         timeout=10).status_code == 201
    led = poll(lambda: [p for p in range(6) if _partition(controller, topic, p)["leader"] == victim.node_id],
               30, 0.05, "a partition led by the victim")[0]
    poll(lambda: len(_partition(controller, topic, led)["isr"]) == 2, 30, 0.05, "a full ISR")
    killed = time.monotonic()
    victim.kill()

    def new_leader() -> int | None:
        leader = _partition(survivors[0], topic, led)["leader"]
        return None if leader in (-1, victim.node_id) else leader
    leader = poll(new_leader, 120, 0.005, "a new leader")
    moved = time.monotonic()
    poll(lambda: _produce_one(cluster.nodes[leader], topic, led), 60, 0.005, "a produce to the moved partition")
    produced = time.monotonic()
    victim.start()
    cluster.wait_ready()
    return {"failover_ms": (produced - killed) * 1000, "leader_change_ms": (moved - killed) * 1000}


@main.command()
@click.option("--target", type=click.Choice(["controller", "broker"]), required=True)
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--session-timeout-ms", type=click.IntRange(min=100), default=9000, show_default=True,
              help="broker.session.timeout.ms of the cluster (Kafka's default).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def failover(target: str, runs: int, session_timeout_ms: int, json_path: str | None) -> None:
    """Kill -9 the active controller (time to the first successful metadata write) or a broker
    (time to the first successful produce to a partition it led) on a local 3-node cluster."""
    overrides = {"broker.session.timeout.ms": session_timeout_ms,
                 "broker.heartbeat.interval.ms": max(50, min(2000, session_timeout_ms // 4))}
    measures: list[dict[str, float]] = []
    with LocalCluster(3, combined=True, overrides=overrides) as cluster:
        start = time.monotonic()
        for run in range(runs):
            measures.append((_controller_failover if target == "controller" else _broker_failover)(cluster, run))
            click.echo(f"run {run + 1}/{runs}: " + ", ".join(f"{k} {v:.0f}" for k, v in measures[-1].items()),
                       err=True)
        elapsed = time.monotonic() - start
    params: dict[str, Any] = {"target": target, "runs": runs, "session_timeout_ms": session_timeout_ms}
    if target == "broker":
        changes = sorted(m["leader_change_ms"] for m in measures)
        params["leader_change_p50_ms"] = round(percentile(changes, 50) or 0, 1)
    report(BenchResult(f"failover-{target}", params, runs, 0, elapsed,
                       sorted(m["failover_ms"] for m in measures)), json_path)


def _wait_offsets(nodes: list[Any], offset: int, started: float, timeout_s: float = 30.0) -> list[float]:
    """Per node, the ms from `started` until its applied metadata offset reaches `offset`."""
    delays: list[float] = []
    sessions = {n.node_id: requests.Session() for n in nodes}
    pending = {n.node_id: n for n in nodes}
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for node_id, node in list(pending.items()):
            try:
                local = sessions[node_id].get(f"{node.url}/v1/controller/quorum/local", timeout=10).json()
            except requests.RequestException:
                continue  # a broker busy opening thousands of new partitions answers late
            if local["metadata_offset"] >= offset:
                delays.append((time.monotonic() - started) * 1000)
                del pending[node_id]
    if pending:
        raise click.ClickException(f"nodes {sorted(pending)} did not reach metadata offset {offset}")
    return delays


def _controller_post(http: requests.Session, cluster: LocalCluster, path: str, body: dict[str, Any],
                     timeout_s: float = 120.0) -> dict[str, Any]:
    """POST to the active controller's API, following NOT_CONTROLLER (an election under load) with
    the same request id, so a retry is applied once."""
    body = {**body, "request_id": uuid.uuid4().hex}
    deadline = time.monotonic() + timeout_s
    url = cluster.active_controller().url
    while True:
        r = http.post(f"{url}{path}", json=body, timeout=timeout_s)
        if r.status_code == 200:
            return r.json()
        answer = r.json()
        if not answer.get("retriable") or time.monotonic() > deadline:
            raise click.ClickException(f"{path}: {r.text}")
        leader = answer.get("leader")
        url = f"http://{leader['host']}:{leader['port']}" if leader else cluster.active_controller().url
        time.sleep(0.05)


@main.command()
@click.option("--partitions", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Partitions to create in total.")
@click.option("--partitions-per-topic", type=click.IntRange(min=1, max=10_000), default=1000, show_default=True)
@click.option("--brokers", type=click.IntRange(min=1), default=2, show_default=True, help="Broker-only nodes.")
@click.option("--samples", type=click.IntRange(min=1), default=100, show_default=True,
              help="Single-partition topics created afterwards to time propagation to every broker.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def metadata(partitions: int, partitions_per_topic: int, brokers: int, samples: int, json_path: str | None) -> None:
    """Metadata scale on a local 3-controller cluster with broker-only nodes: partition creation
    rate, propagation delay from commit to every broker (p50/p99), image size and memory."""
    with LocalCluster(3, brokers, combined=False) as cluster:
        controller = cluster.active_controller()
        http = requests.Session()
        rss_before = {n.node_id: n.rss_bytes() for n in cluster.running()}
        progress = Progress("metadata", sys.stderr)
        created, topic = 0, 0
        start = time.monotonic()
        while created < partitions:
            count = min(partitions_per_topic, partitions - created)
            answer = _controller_post(http, cluster, "/v1/controller/topics",
                                      {"name": f"scale-{topic}", "partitions": count, "replication_factor": 1})
            created, topic = created + count, topic + 1
            progress.update(created, 0)
        committed_s = time.monotonic() - start
        _wait_offsets(cluster.brokers(), answer["metadata_offset"], start, 300)
        elapsed = time.monotonic() - start  # until every broker applied them (and opened the logs)
        delays: list[float] = []
        for i in range(samples):
            answer = _controller_post(http, cluster, "/v1/controller/topics",
                                      {"name": f"probe-{i}", "partitions": 1, "replication_factor": 1})
            delays += _wait_offsets(cluster.brokers(), answer["metadata_offset"], time.monotonic())
        controller = cluster.active_controller()
        snapshot_bytes = len(http.get(f"{controller.url}/v1/controller/snapshot", timeout=120).content)
        growth_mb = {n.node_id: (n.rss_bytes() - rss_before[n.node_id]) / 2**20 for n in cluster.running()}
        broker_ids = [n.node_id for n in cluster.brokers()]
    delays.sort()
    params = {"partitions": partitions, "partitions_per_topic": partitions_per_topic, "brokers": brokers,
              "committed_partitions_per_sec": round(partitions / max(committed_s, 1e-9), 1),
              "propagation_samples": len(delays), "snapshot_bytes": snapshot_bytes,
              "controller_rss_growth_mb": round(growth_mb[controller.node_id], 1),
              "broker_rss_growth_mb": round(max(growth_mb[b] for b in broker_ids), 1)}
    report(BenchResult("metadata", params, partitions, 0, elapsed, delays), json_path)


def _chaos_leader(cluster: LocalCluster, topic: str, not_in: tuple[int, ...] = ()) -> LocalNode:
    """The partition's leader as the running nodes outside `not_in` agree on it."""
    def agreed() -> LocalNode | None:
        leaders = {_partition(n, topic, 0)["leader"] for n in cluster.running()
                   if n.node_id not in not_in}
        leader = leaders.pop() if len(leaders) == 1 else -1
        return cluster.nodes[leader] if leader > 0 and leader not in not_in else None
    return poll(agreed, 60, 0.05, "an agreed partition leader")


def _chaos_full_isr(cluster: LocalCluster, topic: str) -> None:
    size = len(cluster.nodes)
    poll(lambda: all(len(_partition(n, topic, 0)["isr"]) == size for n in cluster.running()),
         120, 0.05, "a full ISR")


def _chaos_round(cluster: LocalCluster, topic: str, wait_acked: Callable[[], None]) -> None:
    """kill -9 the leader and restart it; SIGSTOP the next leader past the session timeout and
    wake it; kill -9 a follower and restart it."""
    leader = _chaos_leader(cluster, topic)
    wait_acked()
    leader.kill()
    paused = _chaos_leader(cluster, topic, not_in=(leader.node_id,))
    wait_acked()
    leader.start()
    _chaos_full_isr(cluster, topic)
    assert paused.proc is not None
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        current = _chaos_leader(cluster, topic, not_in=(paused.node_id,))
        wait_acked()  # acknowledgements go on while the old leader is still paused
    finally:
        paused.proc.send_signal(signal.SIGCONT)  # wakes believing it leads
    wait_acked()
    _chaos_full_isr(cluster, topic)
    follower = next(n for n in cluster.running() if n is not current)
    follower.kill()
    wait_acked()
    follower.start()
    _chaos_full_isr(cluster, topic)


@main.command()
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--session-timeout-ms", type=click.IntRange(min=100), default=3000, show_default=True,
              help="broker.session.timeout.ms of the cluster.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def chaos(rounds: int, session_timeout_ms: int, json_path: str | None) -> None:
    """Replication under faults on a local 3-node cluster (RF 3, min.insync.replicas 2): an
    acks=all producer with retries and a consumer run while leaders are killed, paused and
    restarted; then prints how many records were acknowledged, lost and duplicated."""
    topic = "chaos"
    overrides = {"broker.session.timeout.ms": session_timeout_ms,
                 "broker.heartbeat.interval.ms": max(50, min(2000, session_timeout_ms // 6)),
                 "min.insync.replicas": 2, "replica.lag.time.max.ms": session_timeout_ms}
    with LocalCluster(3, combined=True, overrides=overrides) as cluster:
        bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.running())
        ensure_topic(bootstrap, topic, 1, 3)
        _chaos_full_isr(cluster, topic)
        producer = AckedProducer(bootstrap, topic).start()
        consumer = WatchingConsumer(bootstrap, topic).start()

        def wait_acked() -> None:
            producer.wait_acked_more(200, 120)

        start = time.monotonic()
        try:
            for r in range(rounds):
                _chaos_round(cluster, topic, wait_acked)
                click.echo(f"round {r + 1}/{rounds}: {len(producer.acked)} acknowledged", err=True)
        finally:
            producer.stop()
            consumer.stop()
        elapsed = time.monotonic() - start
        leader = _chaos_leader(cluster, topic)
        offsets = requests.get(f"{leader.url}/v1/topics/{topic}/partitions/0/offsets", timeout=10).json()
        result = audit(producer.acked,
                       read_partition(bootstrap, topic, 0, offsets["high_watermark"]), consumer.seen)
    params = {"rounds": rounds, "acked": result.acked, "lost": result.lost,
              "duplicated": result.duplicated, "truncated_seen": result.truncated_seen,
              "failed_sends": producer.failed}
    report(BenchResult("chaos", params, result.acked, 0, elapsed), json_path)
    click.echo(f"acked {result.acked} / lost {result.lost} / duplicated {result.duplicated}")
    if not result.ok:
        raise click.ClickException(f"acknowledged records lost or served then truncated: {result}")


if __name__ == "__main__":
    sys.exit(main())

"""kraft-bench: the pure measurement helpers, and the commands against the fake broker."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from click.testing import CliRunner

from kraft.api.client.futures import ProduceResult, RecordFuture, RecordFutures
from kraft.api.client.types import TopicPartition
from client_fake_broker import FakeBroker
from kraft.api.client import Producer
from kraft.bench import AckLatencyRecorder, BenchResult, Progress, main, percentile
from kraft.bench.histogram import LatencyHistogram, bucket_floor, bucket_of
from kraft.bench.produce import _send_all


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 1001)]
    assert percentile(values, 50) == 500.0
    assert percentile(values, 99) == 990.0
    assert percentile(values, 99.9) == 999.0
    assert percentile(values, 100) == 1000.0
    assert percentile([7.0], 99.9) == 7.0
    assert percentile([], 50) is None


def test_ack_latency_of_every_record_from_its_own_send() -> None:
    clock = FakeClock()
    rec = AckLatencyRecorder(clock)
    tp = TopicPartition("t", 0)
    a, b = ProduceResult(tp), ProduceResult(tp)
    for i, at_ms in enumerate((0, 1, 2, 3.5, 4)):  # uneven sends into batch a
        clock.now = at_ms / 1000
        rec.on_send(RecordFuture(a, i, 0))
    clock.now = 0.005
    rec.on_send(RecordFuture(b, 0, 0))
    clock.now = 0.010
    a.complete(0)  # done at 10 ms: latencies 10, 9, 8, 6.5, 6
    clock.now = 0.020
    b.complete(5, error=None)
    hist = rec.histogram()
    assert hist.count == 6 and hist.max_us == 15_000 and hist.min_us == 6_000
    assert [hist.percentile_us(q) for q in (10, 30, 50, 60, 80, 100)] == [6000, 6500, 8000, 9000, 10000, 15000]
    assert rec.failed_records == 0
    # what --trace follows: the first record of each run of sends into one batch, its offset
    assert [(t, offset) for t, offset, *_ in rec.traced_records()] == [(tp, 0), (tp, 5)]


def test_send_many_records_are_timed_from_their_calls_start() -> None:
    clock = FakeClock()
    rec = AckLatencyRecorder(clock)
    tp = TopicPartition("t", 0)
    a, b = ProduceResult(tp), ProduceResult(tp)
    first = RecordFutures(0)
    first.add(a, 0, 3)
    first.add(b, 0, 2)  # the call filled batch a and opened b
    rec.on_send_many(first, 0.001)
    second = RecordFutures(0)
    second.add(b, 2, 4)  # the next call goes on in batch b
    rec.on_send_many(second, 0.004)
    clock.now = 0.010
    a.complete(0)
    clock.now = 0.020
    b.complete(3)
    hist = rec.histogram()
    # a's 3 records 9 ms (from 1 ms), b's first 2 19 ms, b's next 4 16 ms (from 4 ms)
    assert hist.count == 9 and (hist.min_us, hist.percentile_us(50), hist.max_us) == (9000, 16000, 19000)
    assert [(t, offset) for t, offset, *_ in rec.traced_records()] == [(tp, 0), (tp, 3)]  # one run per batch


def test_failed_batches_are_counted_not_timed() -> None:
    from kraft.api.errors import KraftError

    rec = AckLatencyRecorder(FakeClock())
    r = ProduceResult(TopicPartition("t", 0))
    rec.on_send(RecordFuture(r, 0, 0))
    rec.on_send(RecordFuture(r, 1, 0))
    r.complete(-1, KraftError("NOT_ENOUGH_REPLICAS", "x"))
    assert rec.failed_records == 2 and rec.histogram().count == 0


def test_histogram_percentiles_within_a_thousandth() -> None:
    hist = LatencyHistogram()
    values = [1, 7, 2047, 2048, 2049, 123_456, 9_876_543, 3_600_000_000]
    for v in values:
        hist.record_us(v)
        assert bucket_floor(bucket_of(v)) <= v < bucket_floor(bucket_of(v)) * 1.001 + 1
    assert [hist.percentile_us(100 * (i + 1) / len(values)) for i in range(len(values))] == [
        bucket_floor(bucket_of(v)) for v in values]
    assert hist.max_us == 3_600_000_000 and hist.count == 8
    assert LatencyHistogram().summary_ms() == {"p50_ms": None, "p99_ms": None, "p999_ms": None, "max_ms": None}


def test_summary_keys_and_progress_line() -> None:
    latency = LatencyHistogram()
    latency.record_ms([1.0, 2.0, 3.0])
    s = BenchResult("produce", {"acks": "1"}, records=2000, bytes=2 * 1024 * 1024, elapsed_s=2.0,
                    latency=latency).summary()
    assert s["records_per_sec"] == 1000.0 and s["mb_per_sec"] == 1.0
    assert (s["p50_ms"], s["p99_ms"], s["p999_ms"], s["max_ms"]) == (2.0, 3.0, 3.0, 3.0) and s["acks"] == "1"
    out, clock = io.StringIO(), FakeClock()
    progress = Progress("produce", out, clock)
    progress.update(100, 100)
    assert out.getvalue() == ""  # not a second yet
    clock.now = 2.0
    progress.update(2100, 2 * 1024 * 1024)
    assert out.getvalue() == "produce: 2100 records, 1,050 rec/s, 1.00 MB/s\n"


def test_paced_sends_keep_every_record_due_time(broker: FakeBroker) -> None:
    """--throughput: no record is sent before its due time start + i / throughput (no bursts)."""
    sent: list[float] = []
    rec = AckLatencyRecorder()
    with Producer(broker.bootstrap, linger_ms=0) as producer:
        producer.partitions_for("paced")
        original = producer.send

        def send(*args: object, **kwargs: object) -> object:
            sent.append(time.perf_counter())
            return original(*args, **kwargs)

        producer.send = send  # type: ignore[method-assign]
        _send_all(producer, "paced", b"x" * 10, 200, 2000, rec, Progress("t", io.StringIO()))
    start = sent[0]  # the loop's own start is at most this (the first record is due at once)
    assert all(at >= start + i / 2000 - 1e-3 for i, at in enumerate(sent))
    assert sent[-1] - start >= 199 / 2000 - 1e-3  # 200 records at 2,000/s: 0.1 s, not one burst
    assert rec.histogram().count == 200


def test_produce_then_consume_commands(broker: FakeBroker, tmp_path: Path) -> None:
    common = ["--bootstrap-server", broker.bootstrap, "--topic", "bench", "--num-records", "2000", "--record-size", "50"]
    out = tmp_path / "produce.json"
    produced = CliRunner().invoke(main, ["produce", *common, "--partitions", "2", "--json", str(out)], catch_exceptions=False)
    assert produced.exit_code == 0, produced.output
    summary = json.loads(out.read_text())
    assert summary["records"] == 2000 and summary["partitions"] == 2 and summary["errors"] == 0
    assert summary["records_per_sec"] > 0 and 0 < summary["p50_ms"] <= summary["p99_ms"] <= summary["p999_ms"]
    assert broker.end_offset("bench", 0) + broker.end_offset("bench", 1) == 2000
    out = tmp_path / "consume.json"
    consumed = CliRunner().invoke(main, ["consume", *common, "--json", str(out)], catch_exceptions=False)
    assert consumed.exit_code == 0, consumed.output
    summary = json.loads(out.read_text())
    assert summary["records"] == 2000 and summary["mb_per_sec"] > 0


def test_produce_with_send_many(broker: FakeBroker, tmp_path: Path) -> None:
    out = tmp_path / "many.json"
    result = CliRunner().invoke(main, ["produce", "--bootstrap-server", broker.bootstrap, "--topic", "many",
                                       "--num-records", "2500", "--send-many", "1000", "--partitions", "3",
                                       "--json", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    assert summary["records"] == 2500 and summary["errors"] == 0 and summary["send_many"] == 1000
    assert sum(broker.end_offset("many", p) for p in range(3)) == 2500
    refused = CliRunner().invoke(main, ["produce", "--bootstrap-server", broker.bootstrap, "--topic", "many",
                                        "--send-many", "10", "--throughput", "100"])
    assert refused.exit_code == 2 and "--send-many" in refused.output


def test_e2e_command(broker: FakeBroker, tmp_path: Path) -> None:
    out = tmp_path / "e2e.json"
    result = CliRunner().invoke(main, ["e2e", "--bootstrap-server", broker.bootstrap, "--topic", "lat",
                                       "--num-records", "20", "--linger-ms", "0", "--json", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    assert summary["records"] == 20 and summary["p50_ms"] > 0

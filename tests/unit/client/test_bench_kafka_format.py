"""kraft-bench --print-format kafka: the summaries as kafka-producer-perf-test and
kafka-consumer-perf-test print them."""

from __future__ import annotations

import time

from kraft.bench.common import CONSUMER_PERF_HEADER, BenchResult, consumer_perf_summary, producer_perf_summary
from kraft.bench.histogram import LatencyHistogram


def test_producer_perf_summary_is_kafkas_printtotal_line() -> None:
    latencies = LatencyHistogram()
    latencies.record_ms([1.2, 2.9, 3.0, 4.5] * 250)  # 1000 acks
    result = BenchResult("produce", {}, 1000, 1000 * 100, 2.0, latencies)
    assert producer_perf_summary(result) == (
        "1000 records sent, 500.000000 records/sec (0.05 MB/sec), 2.50 ms avg latency, 4.00 ms max latency, "
        "3 ms 50th, 4 ms 95th, 4 ms 99th, 4 ms 99.9th.")


def test_consumer_perf_summary_is_kafkas_header_and_line() -> None:
    start = time.mktime((2026, 3, 30, 13, 18, 56, 0, 0, -1)) + 0.066
    result = BenchResult("consume", {}, 1000, 1024 * 1024, 15.76)
    assert consumer_perf_summary(result, start) == [
        CONSUMER_PERF_HEADER,
        "2026-03-30 13:18:56:066, 2026-03-30 13:19:11:826, 1.0000, 0.0635, 1000, 63.4518, 0, 15760, 0.0635, 63.4518",
    ]
    assert CONSUMER_PERF_HEADER == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                                    "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")

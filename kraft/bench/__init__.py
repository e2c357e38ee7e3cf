"""`kraft-bench`: throughput and latency measurements (kafka-producer-perf-test,
kafka-consumer-perf-test, EndToEndLatency) and the fault-injection runs, one module per benchmark.

Every measurement returns a `BenchResult` and goes through `report()` (`kraft.bench.common`).
`failover`, `metadata` and `chaos` start a throwaway local cluster (`kraft.bench.cluster`) since
they kill its processes; `chaos` (`kraft.bench.chaos`) adds TCP proxies, size-limited disks, a
seeded fault schedule and an independent history checker.
"""

from kraft.bench import chaos, consume, convert, e2e, failover, metadata, peers, produce  # noqa: F401 - registers the subcommands
from kraft.bench.common import AckLatencyRecorder, BenchResult, Progress, main, percentile
from kraft.zk import compare  # noqa: F401,E402 - registers compare-metadata (KRaft vs ZooKeeper mode)

__all__ = ["AckLatencyRecorder", "BenchResult", "Progress", "main", "percentile"]

"""A streaming query (kraft source -> exactly-once kraft sink) on a single node that is killed -9
and restarted while the query copies: the query rides it out, as docs/spark.md promises for
retriable errors within `kraft.request.timeout.ms`, and the sink holds every source record once."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from spark_support import KraftFixture
from harness import shutdown_all, start_node, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

RECORDS = 1500  # 30 micro-batches of 50: the node dies and comes back while the query still copies
TIMEOUT_MS = "60000"  # kraft.request.timeout.ms: the restart (seconds) fits well inside it


@pytest.fixture
def node(tmp_path: Path):
    n = start_node(tmp_path / "node")
    try:
        yield n
    finally:
        shutdown_all([n])


def test_query_survives_a_node_restart_without_loss_or_duplicates(spark, node, tmp_path):
    fixture = KraftFixture(node.bootstrap, None)
    source, sink = fixture.new_topic(prefix="restart-src"), fixture.new_topic(prefix="restart-sink")
    fixture.produce(source, 0, [b"%d" % i for i in range(RECORDS)])

    df = (spark.readStream.format("kraft").option("kraft.bootstrap.servers", node.bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "50")
          .option("kraft.request.timeout.ms", TIMEOUT_MS).load().selectExpr("value"))
    query = (df.writeStream.format("kraft").option("kraft.bootstrap.servers", node.bootstrap)
             .option("topic", sink).option("exactlyOnce", "true").option("kraft.request.timeout.ms", TIMEOUT_MS)
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    restarted = threading.Event()

    def kill_and_restart_when_part_copied() -> None:
        wait_for(lambda: len(fixture.records(sink, 0)) >= 300, 120, what="part of the records copied")
        node.kill()
        node.start()  # same port and data dir; waits until ready again
        restarted.set()

    restarter = threading.Thread(target=kill_and_restart_when_part_copied, daemon=True)
    restarter.start()
    query.awaitTermination(300)
    restarter.join(60)
    assert restarted.is_set(), "the query finished before the node was restarted: nothing was tested"
    assert not query.isActive and query.exception() is None, query.exception()
    copied = Counter(value for _, _, value in fixture.records(sink, 0))
    assert sorted(copied, key=int) == [b"%d" % i for i in range(RECORDS)]  # nothing lost
    assert set(copied.values()) == {1}, {v: n for v, n in copied.items() if n > 1}  # nothing doubled

"""The transactional sink is atomic per micro-batch, with a real local Spark and a real node: every
task of a two-task micro-batch has written (its transaction is open on the coordinator) and a
read_committed reader still sees none of it until the driver's commit; a driver killed -9 between
its EndTxns leaves the committed task's rows visible (the documented window) and the restart from
the checkpoint ends with every row exactly once.

The driver's commit is held by the sink's test hook (the `commit_gates` fixture: in a directory
named after the sink's transactional id prefix, the driver writes `reached-{batch}-{i}` with its
pid before EndTxn i and waits while `allow` holds a number <= i); the broker is not mocked."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from harness import wait_for
from kraft.api.client import Admin

pytestmark = pytest.mark.spark

PER_PARTITION = 20


def fill_source(broker: Any) -> tuple[str, list[set[bytes]]]:
    """A two-partition source (two write tasks), distinct values per partition."""
    source = broker.new_topic(partitions=2, prefix="txn-src")
    values = [{b"p%d-%d" % (p, i) for i in range(PER_PARTITION)} for p in (0, 1)]
    for p in (0, 1):
        broker.produce(source, p, sorted(values[p]))
    return source, values


def start_copy(spark: Any, broker: Any, source: str, sink: str, checkpoint: Path, prefix: str) -> Any:
    """One availableNow run: the whole source is micro-batch 0, one task per source partition."""
    df = (spark.readStream.format("kraft").option("kraft.bootstrap.servers", broker.bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest").load().selectExpr("value"))
    writer = (df.writeStream.format("kraft").option("kraft.bootstrap.servers", broker.bootstrap)
              .option("topic", sink).option("kraft.transactional.id.prefix", prefix)
              .option("checkpointLocation", str(checkpoint)))
    return writer.trigger(availableNow=True).start()


def finish(query: Any) -> None:
    query.awaitTermination(180)
    assert not query.isActive
    if query.exception() is not None:
        raise query.exception()


def ongoing(broker: Any, prefix: str) -> set[str]:
    """The open transactions of the sink's ids (`kraft transactions list`'s data)."""
    with Admin(broker.bootstrap) as admin:
        listed, _ = admin.list_transactions(states=["Ongoing"])
    return {t["transactional_id"] for t in listed if t["transactional_id"].startswith(prefix)}


def reached(gate: Path, batch: int, index: int) -> int:
    """Waits for the driver to stop before EndTxn `index`: its pid."""
    path = gate / f"reached-{batch}-{index}"
    wait_for(path.exists, 180, what=f"the driver to reach EndTxn {index} of micro-batch {batch}")
    return int(wait_for(path.read_text, 10))


def test_a_read_committed_reader_sees_nothing_of_a_micro_batch_until_the_driver_commits(spark, broker, tmp_path,
                                                                                         commit_gates):
    source, values = fill_source(broker)
    sink = broker.new_topic(partitions=2, prefix="txn-sink")
    gate = commit_gates / "atomic-"
    gate.mkdir()
    (gate / "allow").write_text("0")
    seen: list[int] = []
    stop = threading.Event()

    def poll() -> None:  # a read_committed reader all through the writing
        while not stop.is_set():
            seen.append(len(broker.committed_values(sink)))

    reader = threading.Thread(target=poll, daemon=True)
    reader.start()
    query = start_copy(spark, broker, source, sink, tmp_path / "cp", "atomic-")
    try:
        reached(gate, 0, 0)
        assert len(ongoing(broker, "atomic-")) == 2  # both tasks wrote; their transactions are open
        assert sum(len(broker.records(sink, p)) for p in (0, 1)) == 2 * PER_PARTITION  # every row is in the log
        stop.set()
        reader.join(60)
        assert seen and set(seen) == {0}, seen
        assert broker.committed_values(sink) == []
        (gate / "allow").unlink()  # the driver commits
        finish(query)
    finally:
        stop.set()
        if query.isActive:
            query.stop()
    assert sorted(broker.committed_values(sink)) == sorted(values[0] | values[1])
    assert ongoing(broker, "atomic-") == set()


def test_a_driver_killed_between_end_txns_ends_exactly_once_after_a_restart(spark, broker, tmp_path, commit_gates):
    source, values = fill_source(broker)
    sink = broker.new_topic(partitions=2, prefix="txn-sink")
    checkpoint = tmp_path / "cp"
    gate = commit_gates / "killed-"
    gate.mkdir()
    (gate / "allow").write_text("1")  # the first EndTxn goes through, the driver stops before the second
    query = start_copy(spark, broker, source, sink, checkpoint, "killed-")
    try:
        driver = reached(gate, 0, 1)
        assert len(ongoing(broker, "killed-")) == 1  # one task committed, the other still open
        os.kill(driver, signal.SIGKILL)  # the process running the driver's commit
        with pytest.raises(Exception, match="Python worker exited unexpectedly"):  # the micro-batch failed
            query.awaitTermination(180)
        assert not query.isActive
    finally:
        if query.isActive:
            query.stop()
    # the window docs/spark.md names: one task's rows, all of them, and none of the other's
    wait_for(lambda: set(broker.committed_values(sink)) in (values[0], values[1]), 30,
             what="the committed task's rows (its markers follow its EndTxn)")

    (gate / "allow").unlink()  # the restart's driver commits at once
    finish(start_copy(spark, broker, source, sink, checkpoint, "killed-"))  # replays micro-batch 0
    copied = broker.committed_values(sink)
    assert sorted(copied) == sorted(values[0] | values[1])  # every row, each once
    assert ongoing(broker, "killed-") == set()

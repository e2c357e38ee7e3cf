"""The transactional sink's two phases (spark_connector/transactional.py) on a real node, without
Spark: tasks write and leave their transactions open, the driver's `end_transactions` commits or
aborts them. A newer attempt of the same task fences an older one (its rows are aborted, and the
driver cannot commit its epoch: PRODUCER_FENCED), a replay of a committed micro-batch writes
nothing, a commit sent twice or to a stale coordinator still commits once, and a read_committed
reader gets each committed row once and nothing before the driver's commit."""

from __future__ import annotations

import socket
from dataclasses import replace

import pyarrow as pa
import pytest

from kraft.api.client.transactions import TransactionFatalError
from kraft.api.errors import KraftError
from kraft.spark_connector.options import parse_sink_options
from kraft.spark_connector.transactional import TransactionalTask, end_transactions, write_transactional

pytestmark = pytest.mark.spark


def rows(*values: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": list(values), "key": [v.encode() for v in values]})


def sink_options(broker, sink: str, prefix: str):
    return parse_sink_options({"kraft.bootstrap.servers": broker.bootstrap, "topic": sink,
                               "kraft.transactional.id.prefix": prefix, "kraft.request.timeout.ms": "10000"},
                              streaming=True)


def test_attempts_fence_each_other_and_a_replay_writes_nothing(broker):
    sink = broker.new_topic(partitions=2)
    options = sink_options(broker, sink, "fence-")
    zombie = TransactionalTask(options, "query-1", 0, batch_id=0)
    try:
        assert zombie.begin()
        zombie.add(rows("z1", "z2"))
        zombie.producer.flush()  # its rows are in the log, in an open transaction
        written, prepared = write_transactional(options, iter([rows("a", "b", "c")]), "query-1", 0, 0)
        assert written == 3 and prepared is not None
        with pytest.raises(TransactionFatalError):  # fenced by the newer attempt's init
            zombie.prepare()
    finally:
        zombie.close()
    assert broker.committed_values(sink) == []  # written, not committed: the driver has not ended it
    end_transactions(options, [prepared], 0, commit=True)
    assert write_transactional(options, iter([rows("a", "b", "c")]), "query-1", 0, 0) == (0, None)  # replay
    later = [write_transactional(options, iter([rows(v)]), "query-1", w, 1) for w, v in ((0, "d"), (1, "e"))]
    end_transactions(options, [p for _, p in later], 1, commit=True)
    assert sorted(broker.committed_values(sink)) == [b"a", b"b", b"c", b"d", b"e"]


def test_the_driver_cannot_commit_a_fenced_attempt_and_aborts_on_failure(broker):
    sink = broker.new_topic(partitions=1)
    options = sink_options(broker, sink, "driver-")
    _, first = write_transactional(options, iter([rows("first")]), "query-2", 0, 0)
    _, second = write_transactional(options, iter([rows("second")]), "query-2", 0, 0)  # a speculative twin
    assert first is not None and second is not None and second.producer_epoch > first.producer_epoch
    with pytest.raises(KraftError) as fenced:
        end_transactions(options, [first], 0, commit=True)
    assert fenced.value.error_code in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    assert "0 of 1 tasks are committed" in fenced.value.message
    end_transactions(options, [second], 0, commit=False)  # Spark's abort of the micro-batch
    assert broker.committed_values(sink) == []
    _, third = write_transactional(options, iter([rows("third")]), "query-2", 0, 0)  # the micro-batch again
    end_transactions(options, [third], 0, commit=True)
    assert broker.committed_values(sink) == [b"third"]


def test_a_commit_sent_twice_or_to_a_stale_coordinator_commits_once(broker):
    sink = broker.new_topic(partitions=1)
    options = sink_options(broker, sink, "retry-")
    _, prepared = write_transactional(options, iter([rows("once")]), "query-3", 0, 0)
    with socket.socket() as s:  # a port nothing listens on: the coordinator "moved"
        s.bind(("127.0.0.1", 0))
        gone = ("127.0.0.1", s.getsockname()[1])
    end_transactions(options, [replace(prepared, coordinator=gone)], 0, commit=True)
    end_transactions(options, [prepared], 0, commit=True)  # a driver retrying: the coordinator did it already
    assert broker.committed_values(sink) == [b"once"]


def test_a_timeout_above_the_brokers_maximum_fails_the_task_clearly(broker):
    sink = broker.new_topic(partitions=1)
    options = replace(sink_options(broker, sink, "slow-"), transaction_timeout_ms=900_001)  # the broker's max + 1
    with pytest.raises(KraftError) as refused:
        write_transactional(options, iter([rows("x")]), "query-4", 0, 0)
    assert refused.value.error_code == "INVALID_TRANSACTION_TIMEOUT"
    assert "transaction.max.timeout.ms" in refused.value.message

"""The transactional sink's task (spark_connector/transactional.py) on a real node, without Spark:
a newer attempt of the same task fences an older one still writing (its rows are aborted and its
commit fails), a replay of a committed micro-batch writes nothing, the next micro-batch writes
again, and a read_committed reader gets each committed row once."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kraft.api.client.transactions import TransactionFatalError
from kraft.spark_connector.options import parse_sink_options
from kraft.spark_connector.transactional import TransactionalTask, write_transactional

pytestmark = pytest.mark.spark


def rows(*values: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": list(values), "key": [v.encode() for v in values]})


def test_attempts_fence_each_other_and_a_replay_writes_nothing(broker):
    sink = broker.new_topic(partitions=2)
    options = parse_sink_options({"kraft.bootstrap.servers": broker.bootstrap, "topic": sink,
                                  "kraft.transactional.id.prefix": "fence-"}, streaming=True)
    zombie = TransactionalTask(options, "query-1", 0, batch_id=0)
    try:
        assert zombie.begin()
        zombie.add(rows("z1", "z2"))
        zombie.producer.flush()  # its rows are in the log, in an open transaction
        assert write_transactional(options, iter([rows("a", "b", "c")]), "query-1", 0, 0) == 3
        with pytest.raises(TransactionFatalError):  # fenced by the newer attempt's init
            zombie.commit()
    finally:
        zombie.close()
    assert write_transactional(options, iter([rows("a", "b", "c")]), "query-1", 0, 0) == 0  # replay: committed
    assert write_transactional(options, iter([rows("d")]), "query-1", 0, 1) == 1
    assert write_transactional(options, iter([rows("e")]), "query-1", 1, 1) == 1  # another task: its own id
    assert sorted(broker.committed_values(sink)) == [b"a", b"b", b"c", b"d", b"e"]

"""Exactly-once consume-transform-produce under kill -9 (issue 24): a loop process (a group's
Consumer at read_committed and a transactional Producer committing each batch's outputs with the
consumed offsets, `send_offsets_to_transaction`) is killed -9 at random points ten times and
restarted; its successor's `init_transactions` fences it and ends its transaction, and it resumes
from the group's committed offsets. At the end a read_committed reader sees every input's output
exactly once, in input order per partition."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

from harness import shutdown_all, start_node
from kraft.api.client import Admin, Consumer, Producer, TopicPartition
from kraft.api.client.types import NewTopic

PARTITIONS, PER_PARTITION, KILLS = 3, 100, 10

# Prints one line per step (the parent kills it after a random number of them): a kill lands
# before, between or after any of begin, the sends, the offsets and EndTxn.
LOOP_SCRIPT = """
import sys
from kraft import Consumer, Producer, TopicPartition
servers, source, sink, group, partitions, per_partition = sys.argv[1:7]
tps = [TopicPartition(source, p) for p in range(int(partitions))]
producer = Producer(servers, transactional_id="loop-1", linger_ms=0, max_block_ms=60_000)
producer.init_transactions()  # fences the killed loop and ends its transaction first
consumer = Consumer(servers, group_id=group, isolation_level="read_committed", enable_auto_commit=False,
                    max_poll_records=7, fetch_max_wait_ms=100)
consumer.assign(tps)
for tp in tps:
    consumer.seek(tp, consumer.committed(tp) or 0)
print("started", flush=True)
while any(consumer.position(tp) < int(per_partition) for tp in tps):
    batches = consumer.poll(1000)
    if not batches:
        continue
    producer.begin_transaction()
    print("begun", flush=True)
    for tp, records in batches.items():
        for record in records:
            producer.send(sink, record.value.replace(b"in", b"out"), partition=tp.partition)
            print("sent", flush=True)
    producer.send_offsets_to_transaction({tp: rs[-1].offset + 1 for tp, rs in batches.items()},
                                         consumer.group_metadata())
    print("offsets", flush=True)
    producer.commit_transaction()
    print("committed", flush=True)
producer.close()
consumer.close(autocommit=False)
print("done", flush=True)
"""


def committed_output(bootstrap: str, topic: str) -> dict[int, list[str]]:
    """Each partition's values as a read_committed reader sees them, to its last stable offset."""
    consumer = Consumer(bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for tp, records in consumer.poll(1000).items():
                out[tp.partition] += [r.value.decode() for r in records]
        return out
    finally:
        consumer.close(autocommit=False)


def test_a_loop_killed_9_ten_times_outputs_each_input_exactly_once_in_order(tmp_path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    node = start_node(tmp_path, transaction_state_log_num_partitions=1, offsets_topic_num_partitions=1)
    try:
        with Admin(node.bootstrap) as admin:
            admin.create_topics([NewTopic("inputs", PARTITIONS, 1), NewTopic("outputs", PARTITIONS, 1)])
        with Producer(node.bootstrap, enable_idempotence=True) as source:
            for i in range(PER_PARTITION):
                for p in range(PARTITIONS):
                    source.send("inputs", f"in-{p}-{i}".encode(), partition=p)
        argv = [sys.executable, "-c", LOOP_SCRIPT, node.bootstrap, "inputs", "outputs", "transformers",
                str(PARTITIONS), str(PER_PARTITION)]
        kills = []
        for _ in range(KILLS):
            loop = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            assert loop.stdout is not None
            steps = [loop.stdout.readline().strip() for _ in range(rng.randint(1, 40))]
            loop.send_signal(signal.SIGKILL)  # wherever it is now: no close, no abort
            loop.wait(timeout=30)
            assert loop.returncode == -signal.SIGKILL, f"the loop failed on its own after {steps} (seed {seed})"
            assert "done" not in steps, f"the loop finished before its kill (seed {seed})"
            kills.append(steps[-1])
        final = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert final.returncode == 0 and final.stdout.rstrip().endswith("done"), final.stderr[-3000:]
        expected = {p: [f"out-{p}-{i}" for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
        assert committed_output(node.bootstrap, "outputs") == expected, f"seed {seed}, killed after {kills}"
    finally:
        shutdown_all([node])

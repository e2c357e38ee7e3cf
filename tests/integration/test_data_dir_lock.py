"""A data directory serves one process (issue 22 item 1): a second `kraft-node` on it (another
terminal, another --listen) exits at once naming the directory and the pid that holds it, and
writes nothing there, while the first keeps serving; the lock dies with its process, so after a
kill -9 a new node starts on the same directory with everything acknowledged before."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kraft.api.client import Admin, Consumer, Producer, TopicPartition
from harness import NODE_COMMAND, NodeProcess, free_port, shutdown_all

pytestmark = pytest.mark.cluster

RECORDS = 100
# no periodic checkpoint while the test compares the directory's files
QUIET = {"log.flush.offset.checkpoint.interval.ms": 3_600_000}


def files_of(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under `directory` -> (size, modification time in ns)."""
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in directory.rglob("*") if p.is_file()}


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    with Consumer(bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5_000) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        return [record.value for record in consumer]


def test_a_second_node_on_a_data_dir_in_use_exits_and_a_killed_ones_lock_is_gone(tmp_path: Path) -> None:
    first = NodeProcess(node_id=1, data_dir=tmp_path / "data", overrides=QUIET, wait_ready_on_start=True).start()
    second = None
    try:
        Admin(first.bootstrap).create_topic("held", partitions=1)
        with Producer(first.bootstrap, acks="all") as producer:
            for i in range(RECORDS):
                producer.send("held", f"r{i}".encode(), partition=0)
        before = files_of(first.data_dir)

        # the same directory from another terminal: other ports, same node id
        rejected = subprocess.run(NODE_COMMAND + ["--listen", f"127.0.0.1:{free_port()}",
                                                  "--data-dir", str(first.data_dir)],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert rejected.returncode == 1, rejected.stderr
        errors = [line for line in rejected.stderr.splitlines() if " ERROR " in line]
        assert len(errors) == 1, rejected.stderr
        assert str(first.data_dir) in errors[0] and f"pid {first.proc.pid}" in errors[0], errors[0]
        assert files_of(first.data_dir) == before  # not one byte written, not one file added
        assert first.health()["status"] == "ok"
        assert len(read_all(first.bootstrap, "held")) == RECORDS

        first.kill()  # kill -9: the kernel drops the lock with the process
        second = NodeProcess(node_id=1, data_dir=first.data_dir, overrides=QUIET, wait_ready_on_start=True).start()
        assert read_all(second.bootstrap, "held") == [f"r{i}".encode() for i in range(RECORDS)]
    finally:
        shutdown_all([n for n in (first, second) if n is not None])

"""A node under a low open-files limit (issues 11 and 13): hundreds of tiny segments, or more
partitions than it has descriptors, neither exhaust its descriptors nor keep it from restarting:
every segment file borrows a descriptor from the bounded cache (log.open.files.max)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import requests

from harness import NODE_COMMAND, NodeProcess

pytestmark = pytest.mark.cluster

OPEN_FILES_LIMIT = 256
SEGMENTS = 600  # 1,800 segment files: the node used to fail after about 60 of them
WIDE = 400  # partitions, each written: 1,200 segment files, more than the limit


class LimitedNode(NodeProcess):
    """A node started with soft = hard RLIMIT_NOFILE = OPEN_FILES_LIMIT, so it cannot raise it."""

    def command(self) -> list[str]:
        cmd = super().command()
        assert cmd[: len(NODE_COMMAND)] == NODE_COMMAND
        start = (f"import resource; resource.setrlimit(resource.RLIMIT_NOFILE, "
                 f"({OPEN_FILES_LIMIT}, {OPEN_FILES_LIMIT})); from kraft.main import main; main()")
        return [sys.executable, "-c", start] + cmd[len(NODE_COMMAND):]


def open_descriptors(node: NodeProcess) -> int:
    assert node.proc is not None
    return len(os.listdir(f"/proc/{node.proc.pid}/fd"))


def read_values(node: NodeProcess, topic: str, partition: int = 0) -> list[str]:
    session, values, offset = requests.Session(), [], 0
    while True:
        r = session.get(f"{node.url}/v1/topics/{topic}/partitions/{partition}/records",
                        params={"offset": offset, "timeout_ms": 0}, timeout=10)
        assert r.status_code == 200, r.text
        body = r.json()
        values += [x["value"] for x in body["records"]]
        if body["next_offset"] >= body["high_watermark"]:
            return values
        offset = body["next_offset"]


def test_tiny_segments_under_a_low_open_files_limit(tmp_path: Path) -> None:
    # ready after each start: registered and unfenced, so it creates topics and leads them again
    node = LimitedNode(node_id=1, data_dir=tmp_path / "data-1", wait_ready_on_start=True).start()
    try:
        topic = "tiny"
        r = requests.post(f"{node.url}/v1/topics", timeout=10,
                          json={"name": topic, "configs": {"segment.bytes": "14"}})
        assert r.status_code == 201, r.text
        session = requests.Session()
        for i in range(SEGMENTS):  # one batch per request: one segment each
            r = session.post(f"{node.url}/v1/topics/{topic}/records?acks=1",
                             json={"records": [{"value": f"v{i}"}]}, timeout=10)
            assert r.status_code == 200, (i, r.text)
        session.close()
        assert len(list(node.data_dir.glob(f"{topic}-0/*.log"))) == SEGMENTS
        assert open_descriptors(node) < OPEN_FILES_LIMIT
        expected = [f"v{i}" for i in range(SEGMENTS)]
        assert read_values(node, topic) == expected

        # more partitions than descriptors: a partition holds none of its own
        r = requests.post(f"{node.url}/v1/topics", json={"name": "wide", "partitions": WIDE}, timeout=30)
        assert r.status_code == 201, r.text
        r = requests.post(f"{node.url}/v1/topics/wide/records?acks=1", timeout=30,
                          json={"records": [{"value": f"w{p}", "partition": p} for p in range(WIDE)]})
        assert r.status_code == 200 and len(r.json()["partitions"]) == WIDE, r.text
        assert all(p.get("error_code") is None for p in r.json()["partitions"]), r.text
        assert len(list(node.data_dir.glob("wide-*/*.log"))) == WIDE
        assert open_descriptors(node) < OPEN_FILES_LIMIT

        node.kill()  # a crash: recovery re-validates the unflushed segments, a few files at a time
        node.start()
        assert read_values(node, topic) == expected
        r = requests.post(f"{node.url}/v1/topics/{topic}/records?acks=1",
                          json={"records": [{"value": "after the crash"}]}, timeout=10)
        assert r.status_code == 200, r.text
        expected.append("after the crash")

        assert node.stop() == 0
        node.start()
        assert read_values(node, topic) == expected
        assert open_descriptors(node) < OPEN_FILES_LIMIT
        assert read_values(node, "wide", WIDE - 1) == [f"w{WIDE - 1}"]
    finally:
        if node.running:
            node.stop()

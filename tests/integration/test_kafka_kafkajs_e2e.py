"""KafkaJS (Node.js) against a real node's client port: its admin creates a topic, its producer
sends keyed records, which land on the partitions the HTTP path's murmur2 gives; a consumer group
reads them from the earliest offset and commits; then the records and the group's offsets read
back over HTTP. The client is tests/js's pinned kafkajs (`npm ci` in tests/js: scripts/test.sh
runs it); the script is tests/js/kafkajs_e2e.js."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import requests

from harness import NodeProcess, shutdown_all, start_node
from kraft.api.partitioner import partition_for_key

JS = Path(__file__).resolve().parent.parent / "js"
NODE = shutil.which("node")
PARTITIONS, RECORDS = 3, 30

pytestmark = pytest.mark.skipif(
    NODE is None, reason="Node.js is not installed (apt-get install nodejs npm; scripts/test.sh installs them)")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    assert (JS / "node_modules" / "kafkajs").is_dir(), \
        "kafkajs is not installed: run `npm ci` in tests/js (scripts/test.sh does)"
    n = start_node(tmp_path_factory.mktemp("kafkajs"))
    try:
        yield n
    finally:
        shutdown_all([n])


def run_kafkajs(node: NodeProcess, topic: str, group: str) -> dict:
    proc = subprocess.run([NODE, str(JS / "kafkajs_e2e.js"), node.bootstrap, topic, group, str(PARTITIONS),
                           str(RECORDS)], capture_output=True, text=True, timeout=240, cwd=JS)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kafkajs_admin_producer_and_group_consumer_meet_the_http_api(node: NodeProcess) -> None:
    topic, group = f"js-{uuid.uuid4().hex[:8]}", f"js-group-{uuid.uuid4().hex[:8]}"
    answer = run_kafkajs(node, topic, group)
    assert answer["created"] is True
    # each key on the partition the HTTP path's murmur2 gives it
    assert answer["landed"] == {f"key-{i}": partition_for_key(f"key-{i}".encode(), PARTITIONS)
                                for i in range(RECORDS)}
    # the group read every record from the earliest offset, each once
    consumed = answer["consumed"]
    assert sorted((m["key"], m["value"]) for m in consumed) == sorted(
        (f"key-{i}", f"value-{i}") for i in range(RECORDS))
    assert all(m["partition"] == answer["landed"][m["key"]] for m in consumed)
    # the same records over HTTP, partition by partition, at the offsets KafkaJS read them
    for p in range(PARTITIONS):
        over_http = requests.get(f"{node.url}/v1/topics/{topic}/partitions/{p}/records", params={"offset": 0},
                                 timeout=10).json()["records"]
        assert [(r["offset"], r["key"], r["value"]) for r in over_http] == sorted(
            (m["offset"], m["key"], m["value"]) for m in consumed if m["partition"] == p)
    # the group's committed offsets, as HTTP reads them: the end of each partition
    offsets = requests.get(f"{node.url}/v1/groups/{group}/offsets", timeout=10).json()["offsets"]
    assert {(o["topic"], o["partition"]): o["offset"] for o in offsets} == {
        (topic, int(p)): offset for p, offset in answer["committed"].items()}
    assert sum(answer["committed"].values()) == RECORDS

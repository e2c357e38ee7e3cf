"""A fetch serves the stored batches as stored: the `records` of `POST /v1/fetch` are the
partition's `.log` file byte for byte (one read, no decode or re-encode), from the first batch
and from a batch in the middle, plain and compressed, for a consumer and in JSON too."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import msgpack
import pytest
import requests

from harness import shutdown_all, start_node
from kraft.api.client import Admin, Producer
from kraft.log.batch import iter_batches

MSGPACK = "application/msgpack"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("fetch-bytes"))
    yield n
    shutdown_all([n])


def _fetch(node, topic: str, offset: int, partition_max_bytes: int, as_json: bool = False) -> bytes:
    body = {"max_wait_ms": 0, "partitions": [{"topic": topic, "partition": 0, "fetch_offset": offset,
                                              "partition_max_bytes": partition_max_bytes}]}
    if as_json:
        r = requests.post(f"{node.url}/v1/fetch", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return base64.b64decode(r.json()["partitions"][0]["records"])
    r = requests.post(f"{node.url}/v1/fetch", data=msgpack.packb(body), timeout=30,
                      headers={"Content-Type": MSGPACK, "Accept": MSGPACK})
    assert r.status_code == 200, r.content
    return msgpack.unpackb(r.content)["partitions"][0]["records"]


def test_fetched_batches_are_the_log_file_byte_for_byte(node) -> None:
    topic = f"bytes-{uuid.uuid4().hex[:8]}"
    Admin(node.bootstrap).create_topic(topic, partitions=1)
    for compression in ("none", "lz4", "zstd", "none"):  # flushed per codec: several batches each
        with Producer(node.bootstrap, compression_type=compression, batch_size=4_000, linger_ms=0) as producer:
            for i in range(300):
                producer.send(topic, b"%s-%05d-" % (compression.encode(), i) + b"x" * (i % 50), partition=0)
    [log_file] = sorted((Path(node.data_dir) / f"{topic}-0").glob("*.log"))
    stored = log_file.read_bytes()
    batches = list(iter_batches(stored))
    assert len(batches) >= 8

    assert _fetch(node, topic, 0, 10 << 20) == stored  # every batch, as stored
    assert _fetch(node, topic, 0, 10 << 20, as_json=True) == stored
    # from a batch in the middle holding several records (the producer may send some alone),
    # cut by partition_max_bytes: whole batches, a slice of the file
    middle = min((i for i, (_, h) in enumerate(batches[:-3]) if h.record_count > 1),
                 key=lambda i: abs(i - len(batches) // 2))
    pos, header = batches[middle]
    end_pos, _ = batches[middle + 3]
    got = _fetch(node, topic, header.base_offset + 1, end_pos - pos)  # an offset inside the batch
    assert got == stored[pos:end_pos]
